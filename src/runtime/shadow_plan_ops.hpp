#pragma once
// The shadow pipeline's ops in a step's plan (shadow.hpp describes the pipeline they drive). The
// refresh schedule is a pure function of the step (optim/refresh_schedule.hpp), so the ops of any
// step are known when its plan is built, by the pipeline and by --print-plan
// (train/plan_description.cpp) alike; this unit holds no state of the refreshes in flight.
#include <cstdint>
#include <string>
#include <vector>

#include "optim/refresh_schedule.hpp"
#include "runtime/plan.hpp"
#include "runtime/plan_builder.hpp"
#include "runtime/root_job_placement.hpp"
#include "runtime/shadow_delay.hpp"

namespace asteria {

// The shadow pipeline's ops in a step's plan: publish_wait(l) before optim_step(l) for the
// blocks publishing now, snapshot(l) after it (after each of its parts) and one root_job per block refreshing now (host
// lane); or, with a placement (compute lane), root_jobs ops running the parts placed at this
// step: at its end, or, where the placement has two batches (gradient reductions to overlap),
// after the last backward (refreshes opened earlier) and at the end (opened now).
class ShadowPlanOps final : public PlanContributor {
 public:
  // blocks_per_layer[l]: number of preconditioned blocks of layer l; placement: null for host
  // workers.
  // coherent: the blocks are replicated (coherence_sync ops).
  ShadowPlanOps(const RefreshSchedule& schedule, std::vector<int> blocks_per_layer, ShadowDelay delay,
                const RootJobPlacement* placement = nullptr, bool coherent = false);
  // After the last backward (its reductions already queued on the comm lane): the step's
  // coherence syncs, and (two batches) the root-job parts of refreshes opened at earlier steps,
  // so that both overlap the last gradient reductions, which clip_grads waits for.
  void backward(PlanBuilder& b, int layer, int micro) override;
  void optimizer(PlanBuilder& b, int layer) override;
  void after_optimizer_part(PlanBuilder& b, int layer, BlockRange part) override;
  // The parts of the refreshes opened at this step (after their snapshots), with one batch
  // all the step's parts.
  void step_end(PlanBuilder& b) override;

  // A root_jobs op's Op::block: which of the step's placed tasks it runs.
  static constexpr int kEarlierRefreshes = 0;   // opened at an earlier step (before clip_grads)
  static constexpr int kThisStepsRefreshes = 1; // opened at this step (at its end)
  static constexpr int kAllRefreshes = 2;       // all (one batch, at its end)
  // Whether a root_jobs op of `step` of kind `which` runs task t.
  static bool runs(int which, int64_t step, const PlacedTask& t) {
    return which == kAllRefreshes || (t.opened == step) == (which == kThisStepsRefreshes);
  }
  // --print-plan detail of a root_jobs op: its jobs and their publish steps.
  std::string describe(const Op& op, const std::vector<std::string>& layer_names) const;

 private:
  const RefreshSchedule& schedule_;
  std::vector<int> blocks_;
  ShadowDelay delay_;
  const RootJobPlacement* placement_;
  bool coherent_;
  mutable std::vector<PlacedTask> tasks_;
  // Whether refreshes of `layer` publish at `step` (a publish_wait, and with replicas a sync).
  bool publishes(int layer, int64_t step) const;
  // Adds the root_jobs op of `step`'s tasks of one kind (kEarlierRefreshes, ...).
  void add_batch(PlanBuilder& b, int which);
};

}  // namespace asteria
