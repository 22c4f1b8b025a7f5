#pragma once
// When each preconditioner block refreshes, as a pure function of the global optimizer step t
// (1-based), so that the plan of any step is known before it runs and for any model size:
//
//   block b refreshes at step t  <=>  c(t) >= 0 and (c(t) + offset(b)) % F == 0
//
// with c(t) the algorithm's refresh count: Shampoo t - start_preconditioning_step (roots from
// that step on); SOAP and KL-Shampoo t - 1 (their first call only initializes and is not
// counted, as in the authors' implementations). offset(b) = 0 is the reference schedule.
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

namespace asteria {

// The estimated refresh cost of a block, in flops up to a constant (rows^3 + cols^3).
double refresh_cost(const MatrixBlock& b);

class RefreshSchedule {
 public:
  RefreshSchedule() = default;
  RefreshSchedule(const std::string& algorithm, int64_t frequency, int64_t start_step, bool stagger,
                  const std::vector<std::vector<MatrixBlock>>& blocks);
  int64_t count_at(int64_t step) const;
  bool due(int layer, int block, int64_t step) const;
  int64_t frequency() const { return frequency_; }
  int64_t offset(int layer, int block) const { return offsets_[layer][block]; }

 private:
  bool shampoo_ = false;
  int64_t frequency_ = 1;
  int64_t start_ = 1;
  std::vector<std::vector<int64_t>> offsets_;   // [layer][block]
};

}  // namespace asteria
