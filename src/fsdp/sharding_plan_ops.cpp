#include "fsdp/sharding_plan_ops.hpp"

#include <algorithm>

namespace asteria {

int ShardingPlanOps::param_buffers(int prefetch, int num_layers, bool tied_head) {
  return std::min(std::max(prefetch, 1), num_layers) + 1 + (tied_head ? 1 : 0);
}

bool ShardingPlanOps::gathered_for_backward(int layer, int num_layers, int prefetch) {
  return layer >= 1 && layer < num_layers - std::min(std::max(prefetch, 1), num_layers);
}

int ShardingPlanOps::prefetch(const PlanBuilder& b) const { return std::min(prefetch_, b.shape().num_layers); }

void ShardingPlanOps::add_gather(PlanBuilder& b, int layer, int micro) {
  Op op;
  op.kind = OpKind::Gather;
  op.lane = Lane::Comm;
  op.layer = layer;
  op.micro = micro;
  op.writes = {{StateKind::Params, layer}};
  b.add(std::move(op));
}

void ShardingPlanOps::add_release(PlanBuilder& b, int layer, int micro, int after) {
  Op op;
  op.kind = OpKind::Release;
  op.layer = layer;
  op.micro = micro;
  op.deps = {after};
  op.writes = {{StateKind::Params, layer}};
  b.add(std::move(op));
}

void ShardingPlanOps::micro_begin(PlanBuilder& b, int micro) {
  if (!sharded_) return;
  for (int l = 0; l < prefetch(b); ++l) add_gather(b, l, micro);
}

void ShardingPlanOps::forward(PlanBuilder& b, int layer, int micro) {
  if (!sharded_) return;
  // Released unless the backward starts with it (the last p layers; the embedding, which the
  // tied head reads, is released by the head's backward).
  const bool kept = layer == 0 ? tied_ : !gathered_for_backward(layer, b.shape().num_layers, prefetch_);
  if (!kept) add_release(b, layer, micro, b.find(OpKind::Forward, layer, micro));
  if (layer + prefetch(b) < b.shape().num_layers) add_gather(b, layer + prefetch(b), micro);
}

void ShardingPlanOps::add_reduction(PlanBuilder& b, OpKind kind, int layer, int micro, int after) {
  Op op;
  op.kind = kind;
  op.lane = Lane::Comm;
  op.layer = layer;
  op.micro = micro;
  op.deps = {after};
  op.reads = {{StateKind::Grads, layer}};
  op.writes = {{StateKind::Grads, layer}};
  b.add(std::move(op));
}

void ShardingPlanOps::backward(PlanBuilder& b, int layer, int micro) {
  const int L = b.shape().num_layers;
  const int bwd = b.find(OpKind::Backward, layer, micro);
  if (sharded_) {
    // The gather first in the comm lane's order: it needs no more than a free buffer, so it
    // runs while backward(l) computes.
    if (gathered_for_backward(layer - prefetch(b), L, prefetch_)) add_gather(b, layer - prefetch(b), micro);
    add_reduction(b, OpKind::ReduceScatter, layer, micro, bwd);
    if (layer >= 1) add_release(b, layer, micro, bwd);
    if (tied_ && layer == L - 1) add_release(b, 0, micro, bwd);
  } else if (reduces_ && micro == b.shape().micro_batches - 1) {
    add_reduction(b, OpKind::AllReduce, layer, micro, bwd);
  }
}

}  // namespace asteria
