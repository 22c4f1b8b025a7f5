#pragma once
// Where root jobs run when the shadow pipeline has no cores of its own (runtime.shadow.lane
// compute): on the compute lane's threads, in one parallel batch at the end of a step, each job
// on one thread. A job's result depends only on its snapshot, and a single-threaded LAPACK call
// rounds the same on any thread, so this changes when the work is done, never the parameters:
// the bits equal those of the host workers.
//
// A refresh opened at step t publishes at t + D, so it may run at the end of any step
// t + lag, 0 <= lag <= D - 1. The lags are chosen once (the schedule is periodic in F) to pair
// jobs of similar cost on the threads of a step: a step's batch takes as long as its busiest
// thread, so one large job beside idle threads costs as much as several. Greedy, largest job
// first (cost rows^3 + cols^3), each into the lag whose step's busiest thread grows least
// (ties: the smaller lag). Deterministic; depends on the thread count, which is allowed since
// placement never changes the results.
#include <cstdint>
#include <vector>

#include "optim/refresh_schedule.hpp"
#include "runtime/shadow_delay.hpp"

namespace asteria {

struct PlacedJob {
  int layer = 0, block = 0;
  int64_t opened = 0;    // the step whose snapshot it computes (publishes at opened + D)
};

class RootJobPlacement {
 public:
  // delay.delay >= 1; threads: the compute lane's threads.
  RootJobPlacement(const RefreshSchedule& schedule, const std::vector<std::vector<MatrixBlock>>& blocks,
                   ShadowDelay delay, int threads);
  int64_t lag(int layer, int block) const { return lag_[layer][block]; }
  // The jobs that run at the end of `step`, largest first (the order they are handed out in).
  void jobs_at(int64_t step, std::vector<PlacedJob>& out) const;

 private:
  const RefreshSchedule& schedule_;
  ShadowDelay delay_;
  std::vector<std::vector<int64_t>> lag_;   // [layer][block]
  std::vector<PlacedJob> by_cost_;          // every (layer, block), largest first
};

}  // namespace asteria
