#pragma once
// The plan contributors of a training step on one process:
//   ModelStepOps      load_batch(m), forward(l, m), [recompute(l, m)], backward(l, m); the
//                     recompute of a block whose activations are not kept (activation
//                     recompute), after its parameters are gathered for the backward
//   OptimizerStepOps  grad_norm(l) after the last micro-batch's backward of l (with several
//                     ranks: after the gradient's reduction too, placed one backward later so
//                     the compute lane runs on while the comm lane reduces), clip_grads,
//                     optim_step(l) (which also zeroes the layer's gradient for the next step)
// A forward or backward waits for the layer's gather of its micro-batch when the plan has one, or
// for its read from the disk tier (parameters on disk, fsdp/param_offload_plan_ops.hpp), and an
// optim_step for the layer's read before it. They only describe the step; the trainer binds the
// handlers that do the work.
#include <vector>

#include "runtime/plan_builder.hpp"

namespace asteria {

class ModelStepOps final : public PlanContributor {
 public:
  // tied_head: the head reads the embedding matrix and adds to its gradient.
  // recomputed[l]: layer l recomputes its activations before its backward (empty: none does).
  explicit ModelStepOps(bool tied_head, std::vector<bool> recomputed = {})
      : tied_head_(tied_head), recomputed_(std::move(recomputed)) {}
  void micro_begin(PlanBuilder& b, int micro) override;
  void forward(PlanBuilder& b, int layer, int micro) override;
  void backward(PlanBuilder& b, int layer, int micro) override;

 private:
  bool tied_head_;
  std::vector<bool> recomputed_;
};

class OptimizerStepOps final : public PlanContributor {
 public:
  void backward(PlanBuilder& b, int layer, int micro) override;
  void optimizer_begin(PlanBuilder& b) override;
  void optimizer_part(PlanBuilder& b, int layer, BlockRange part) override;

 private:
  void add_grad_norm(PlanBuilder& b, int layer);
  int deferred_ = -1;   // a reduced layer whose grad_norm waits for the next backward
};

// The contributors of one step, in the order they add their ops at each hook of the builder.
// The order is the plan's: an async checkpoint's copy comes first (it precedes every tier move
// on the staging lane); the comm lane's gathers and reductions follow the model's ops and
// precede the optimizer's; the shadow pipeline's publish_wait(l) and the tiers' tier_wait(l)
// precede optim_step(l). Null members are absent (no checkpoints, one rank, native mode, ...).
// Both the trainer and --print-plan assemble their plans with add_step_contributors.
struct StepContributors {
  PlanContributor* checkpoint = nullptr;
  PlanContributor* model = nullptr;
  PlanContributor* sharding = nullptr;
  PlanContributor* params = nullptr;   // parameters on the disk tier: after the model's ops, which its releases follow
  PlanContributor* shadow = nullptr;
  PlanContributor* tiers = nullptr;
  PlanContributor* optimizer = nullptr;
};
void add_step_contributors(PlanBuilder& builder, const StepContributors& parts);

}  // namespace asteria
