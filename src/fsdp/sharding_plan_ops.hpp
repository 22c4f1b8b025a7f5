#pragma once
// The comm-lane ops of multi-rank training (see sharding.hpp), added to each step's plan:
//   gather(l)          sharded: before layer l's first forward; layers 0 .. prefetch-1 at the
//                      step's start, then gather(l + prefetch) after forward(l), so a gather
//                      runs while the compute lane works prefetch layers behind it;
//   reduce_scatter(l)  sharded: right after layer l's last backward;
//   all_reduce(l)      replicated only (fsdp none): right after layer l's last backward.
// Register after the model's contributor (its forward and backward ops come first at each
// point) and before the optimizer's (grad_norm waits for the reduction).
#include "runtime/plan_builder.hpp"

namespace asteria {

class ShardingPlanOps final : public PlanContributor {
 public:
  // sharded: the shard group has several ranks; reduces: there are several ranks at all.
  ShardingPlanOps(bool sharded, bool reduces, int prefetch)
      : sharded_(sharded), reduces_(reduces), prefetch_(prefetch < 1 ? 1 : prefetch) {}
  void micro_begin(PlanBuilder& b, int micro) override;
  void forward(PlanBuilder& b, int layer, int micro) override;
  void backward(PlanBuilder& b, int layer, int micro) override;

 private:
  void add_gather(PlanBuilder& b, int layer);
  bool sharded_, reduces_;
  int prefetch_;
};

}  // namespace asteria
