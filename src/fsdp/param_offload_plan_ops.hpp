#pragma once
// The ops of parameters on the disk tier (runtime.tiers.params.home disk, param_offload.hpp) in a
// step's plan. A step uses an offloaded layer's parameters, in plan order, at forward(l, m) and
// backward(l, m) (with its recompute) of every micro-batch m, then at its optimizer step (all its
// parts). Counting only these uses, with d = runtime.tiers.params.prefetch_distance:
//   - a use whose layer was not used in the d + 1 uses before it (nor yet in this step) needs a
//     param_load (staging lane), added at the end of the use d + 1 before it (after that use's
//     release), or at the step's start for the first d + 1 uses: the read runs while the d uses
//     between compute;
//   - after a use whose layer is not used again in the d + 1 uses after it (nor again in this
//     step): param_release (compute lane) after a forward or backward, param_store (staging
//     lane, the layer's last optimizer part before it) after the optimizer step; otherwise the
//     layer's buffer is kept to that use (the last blocks of the forward stay for the backward,
//     as a sharded run keeps its last gathers).
// The forward, recompute, backward and optim_step of a layer wait for its load (step_plan.hpp
// finds it: the param_load of the layer and micro-batch; the optimizer's has micro -1).
//
// Buffers: when the load for use j is added (use j - d - 1 has ended), every buffer held is a
// distinct layer whose next use is one of the d + 1 uses up to j: at most d + 1 (buffers()). The
// others were released on the compute lane before the load was queued, or stored on the
// staging lane ahead of it, so a load never waits for a buffer that an op after it frees, and
// never finds its layer still held. The next step's loads come after every store of this one
// (the executor drains the staging lane at the end of a step): a layer is read after its write.
//
// Not with sharding (the trainer refuses both at once): a sharded run's layers come from its
// shards, not from here.
#include <vector>

#include "runtime/plan_builder.hpp"

namespace asteria {

class ParamOffloadPlanOps final : public PlanContributor {
 public:
  // on_disk: per layer of the model, whether its parameters live on the disk tier.
  ParamOffloadPlanOps(std::vector<bool> on_disk, int prefetch_distance);

  // The whole-layer buffers a step holds at most.
  static int buffers(int prefetch_distance, int offloaded_layers);

  void micro_begin(PlanBuilder& b, int micro) override;
  void forward(PlanBuilder& b, int layer, int micro) override;
  void backward(PlanBuilder& b, int layer, int micro) override;
  void after_optimizer_part(PlanBuilder& b, int layer, BlockRange part) override;

 private:
  struct Use {
    int layer = 0;
    int micro = -1;       // -1: the optimizer step
    bool load = false;    // a param_load brings the layer in for it
    bool free = false;    // after it, the layer's buffer is released (or stored)
  };
  // This step's uses and what each needs, from the step's shape.
  void plan_uses(const StepShape& shape);
  // Use `next_` of `layer` ended with op `ended_by`: its release or store, then the load d + 1
  // uses ahead.
  void end_use(PlanBuilder& b, int layer, int micro, int ended_by);
  void add_load(PlanBuilder& b, size_t use);

  std::vector<bool> on_disk_;
  int distance_;
  std::vector<Use> uses_;
  size_t next_ = 0;   // the next use to end
};

}  // namespace asteria
