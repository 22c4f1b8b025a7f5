#pragma once
// When each preconditioner block refreshes, as a pure function of the global optimizer step t
// (1-based), so that the plan of any step is known before it runs and for any model size. With
// F = precondition_frequency and offset(b) the block's stagger offset (0: the reference):
//
//   Shampoo (Distributed Shampoo, S = start_preconditioning_step): at t = S, and at every t > S
//     with (t + offset(b)) % F == 0. S need not be a multiple of F: the reference refreshes at
//     S and then at the multiples of F after it (distributed_shampoo.py, "amortized
//     computation"), so the first gap may be shorter than F. Every block gets its first roots at
//     S, where the reference switches from grafting to Shampoo, stagger or not.
//   SOAP and KL-Shampoo: at every t >= 2 with (t - 1 + offset(b)) % F == 0 (their first call
//     only initializes and is not counted, as in the authors' implementations).
//
// phase(b) is the residue mod F of a block's periodic refreshes.
//
// With stagger, the offsets spread the refresh work over the F steps of a period. A refresh
// costs about rows^3 + cols^3 (an eigendecomposition or QR per Kronecker factor), and blocks
// differ by up to (max_preconditioner_dim / smallest dim)^3, so the offsets are balanced by that
// cost, not by count: largest block first into the least loaded step (LPT), then the steps are
// ordered heaviest, lightest, second heaviest, second lightest, ... so that neighbouring steps,
// whose root work overlaps on the host workers, even out. Deterministic: ties go to the lower
// (layer, block) and the lower step.
#include <cstdint>
#include <string>
#include <vector>

#include "optim/blocks.hpp"
#include "optim/optim_config.hpp"

namespace asteria {

// The estimated refresh cost of a block, in flops up to a constant (rows^3 + cols^3).
double refresh_cost(const MatrixBlock& b);

class RefreshSchedule {
 public:
  RefreshSchedule() = default;
  RefreshSchedule(OptimizerKind algorithm, int64_t frequency, int64_t start_step, bool stagger,
                  const std::vector<std::vector<MatrixBlock>>& blocks);
  bool due(int layer, int block, int64_t step) const;
  // The periodic refreshes of the block are the steps t (after the first) with t % F == phase.
  int64_t phase(int layer, int block) const;
  int64_t frequency() const { return frequency_; }
  int64_t offset(int layer, int block) const { return offsets_[layer][block]; }
  // The schedule of a subset of the blocks (a sharded rank's): block b of layer l here is block
  // index[l][b] of this schedule, with its offset, so a rank's blocks refresh when they would in
  // the whole model's schedule.
  RefreshSchedule subset(const std::vector<std::vector<int>>& index) const;

 private:
  bool shampoo_ = false;
  int64_t frequency_ = 1;
  int64_t start_ = 1;
  std::vector<std::vector<int64_t>> offsets_;   // [layer][block]
};

}  // namespace asteria
