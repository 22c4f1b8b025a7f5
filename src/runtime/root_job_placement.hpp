#pragma once
// Where root jobs run when the shadow pipeline has no cores of its own (runtime.shadow.lane
// compute): on the compute lane's threads, in parallel batches (below). A refresh
// is computed in parts (BlockPreconditioner::compute_refresh_part: a QR refresh's power step,
// geqrf and orgqr; an inverse root's eigendecomposition and product); a part's result depends
// only on the snapshot and the parts before it, and a single-threaded LAPACK call rounds the same
// on any thread, so where and when the parts run never changes the parameters: the bits equal
// those of the host workers, which run each refresh whole.
//
// A refresh opened at step t publishes at t + D, so each of its parts may run at the end of any
// step t + lag, 0 <= lag <= D - 1, in order (lags non-decreasing). The parts a step runs of one
// refresh form one task (run in order on one thread); a batch takes as long as its busiest
// thread, tasks handed out largest first to the thread that frees up first. A step runs its tasks
// in one batch at its end, or, where the step has gradient reductions to overlap, in two: those of
// refreshes opened earlier right after the last backward (beside the reductions), those opened at
// this step at its end (they need this step's snapshot); then a lag-0 task shares its batch
// only with other lag-0 tasks, and the step's time is the two batches'. The lags
// are chosen once (the schedule is periodic in F) to make the batches both short and even, so
// that no step pays for a large refresh beside an idle thread and no step stands out:
// minimize F * (longest batch) + (sum of the batches over a period). A local search from three
// starts, the best result kept: two greedy ones (largest refresh first, each part into the lag
// whose step grows least) and one spreading every refresh evenly over the lags; its moves: one
// part or a whole refresh while one lowers the objective, then a joint move of two large
// refreshes of the longest step. Deterministic; depends on the thread count, which is allowed
// since placement never changes the results.
#include <array>
#include <cstdint>
#include <string>
#include <set>
#include <vector>

#include "optim/refresh_schedule.hpp"
#include "runtime/shadow_delay.hpp"

namespace asteria {

// Parts [begin, end) of the refresh of (layer, block) opened at `opened` (publishing at
// opened + D), run in order on one thread.
struct PlacedTask {
  int layer = 0, block = 0;
  int64_t opened = 0;
  int begin = 0, end = 0;
  double cost = 0;   // the parts' costs, summed
};

class RootJobPlacement {
 public:
  // [layer][block][part]: the cost of each part of each block's refresh (refresh_part_costs).
  using PartCosts = std::vector<std::vector<std::vector<double>>>;

  // delay.delay >= 1; threads: the compute lane's threads; two_batches: a step's tasks run in
  // two batches (the step has gradient reductions to overlap), else in one at its end.
  RootJobPlacement(const RefreshSchedule& schedule, const PartCosts& costs, ShadowDelay delay, int threads,
                   bool two_batches);
  bool two_batches() const { return two_batches_; }
  // The lag of a part: it runs at the end of step opened + lag.
  int64_t lag(int layer, int block, int part) const;
  // The tasks that run at the end of `step`, largest first (the order they are handed out in).
  void tasks_at(int64_t step, std::vector<PlacedTask>& out) const;
  // Over one period of F steps: the longest step (its batches) and the sum of the steps, in cost
  // units.
  double longest_batch() const;
  double period_batches() const;

 private:
  struct Refresh {
    int layer, block;
    int64_t first;               // the residue mod F of its periodic refreshes (RefreshSchedule::phase)
    std::vector<double> cost;    // per part
    std::vector<int64_t> lag;    // per part, non-decreasing
    double total;
  };
  size_t residue(const Refresh& r, int64_t lag) const;
  double batch_time(size_t residue) const;   // from members_: the step's batches, summed
  // The search (root_job_placement.cpp): refresh i leaves / joins the batches of its parts'
  // residues (attach updates the batch times of every residue in `touched`); the objective of
  // the current lags; set_lags moves refresh i and returns the objective after the move.
  std::set<size_t> detach(size_t i);
  void attach(size_t i, std::set<size_t>& touched);
  double objective() const;
  double set_lags(size_t i, const std::vector<int64_t>& lags);
  void place_greedily(int64_t lags, bool later_on_ties);
  void spread(int64_t lags);
  void improve(int64_t lags);

  const RefreshSchedule& schedule_;
  ShadowDelay delay_;
  int threads_;
  bool two_batches_;
  std::vector<Refresh> refreshes_;                   // largest first
  std::vector<std::vector<size_t>> index_;           // [layer][block] -> refreshes_
  struct Member {
    size_t refresh;
    double cost[2];   // its parts' cost in the step's first batch and in its second (lag 0)
  };
  std::vector<std::vector<Member>> members_;         // [residue]: refreshes with a part there
  std::vector<double> batch_;                        // [residue]: that step's batch time
  std::vector<std::array<std::vector<double>, 2>> tasks_by_size_;   // [residue][batch]: members' costs there, largest first
  mutable std::vector<double> busy_;                 // batch_time scratch
  double scale_ = 1;                                 // 1 / the largest refresh (objective's range)
};

// refresh_part_costs of every block.
RootJobPlacement::PartCosts refresh_part_costs(OptimizerKind algorithm,
                                               const std::vector<std::vector<MatrixBlock>>& blocks);

}  // namespace asteria
