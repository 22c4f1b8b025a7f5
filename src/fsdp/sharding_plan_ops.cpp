#include "fsdp/sharding_plan_ops.hpp"

namespace asteria {

void ShardingPlanOps::add_gather(PlanBuilder& b, int layer) {
  if (layer >= b.shape().num_layers) return;
  Op op;
  op.kind = OpKind::Gather;
  op.lane = Lane::Comm;
  op.layer = layer;
  op.writes = {{StateKind::Params, layer}};
  b.add(std::move(op));
}

void ShardingPlanOps::micro_begin(PlanBuilder& b, int micro) {
  if (!sharded_ || micro != 0) return;
  for (int l = 0; l < prefetch_; ++l) add_gather(b, l);
}

void ShardingPlanOps::forward(PlanBuilder& b, int layer, int micro) {
  if (sharded_ && micro == 0) add_gather(b, layer + prefetch_);
}

void ShardingPlanOps::backward(PlanBuilder& b, int layer, int micro) {
  if (!reduces_ || micro != b.shape().micro_batches - 1) return;
  Op op;
  op.kind = sharded_ ? OpKind::ReduceScatter : OpKind::AllReduce;
  op.lane = Lane::Comm;
  op.layer = layer;
  op.deps = {b.find(OpKind::Backward, layer, micro)};
  op.reads = {{StateKind::Grads, layer}};
  op.writes = {{StateKind::Grads, layer}};
  b.add(std::move(op));
}

}  // namespace asteria
