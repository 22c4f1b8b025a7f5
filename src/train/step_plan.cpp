#include "train/step_plan.hpp"

namespace asteria {

namespace {
StateRef params(int l) { return {StateKind::Params, l}; }
StateRef grads(int l) { return {StateKind::Grads, l}; }
StateRef acts(int l) { return {StateKind::Activations, l}; }
StateRef batch() { return {StateKind::Batch, -1}; }

// The ops that bring layer l's parameters in for micro-batch m: its gather (sharded) or its read
// from the disk tier (parameters on disk; a layer kept from its last use has none).
void add_params_deps(const PlanBuilder& b, int layer, int micro, std::vector<int>& deps) {
  for (OpKind k : {OpKind::Gather, OpKind::ParamLoad})
    if (const int load = b.find(k, layer, micro); load >= 0) deps.push_back(load);
}
}  // namespace

void ModelStepOps::micro_begin(PlanBuilder& b, int micro) {
  Op op;
  op.kind = OpKind::LoadBatch;
  op.micro = micro;
  // The embedding's backward of the previous micro-batch still reads the token ids.
  if (micro > 0) op.deps = {b.find(OpKind::Backward, 0, micro - 1)};
  op.writes = {batch()};
  b.add(std::move(op));
}

void ModelStepOps::forward(PlanBuilder& b, int layer, int micro) {
  const int last = b.shape().num_layers - 1;
  Op op;
  op.kind = OpKind::Forward;
  op.layer = layer;
  op.micro = micro;
  op.deps = {layer == 0 ? b.find(OpKind::LoadBatch, -1, micro)
                        : b.find(OpKind::Forward, layer - 1, micro)};
  // Sharded: the layer's parameters gathered first (the tied head reads the embedding, gathered
  // long before it); on disk: read first.
  add_params_deps(b, layer, micro, op.deps);
  op.reads = {params(layer)};
  if (layer == 0 || layer == last) op.reads.push_back(batch());
  if (layer == last && tied_head_) op.reads.push_back(params(0));
  op.writes = {acts(layer)};
  b.add(std::move(op));
}

void ModelStepOps::backward(PlanBuilder& b, int layer, int micro) {
  const int last = b.shape().num_layers - 1;
  Op op;
  op.kind = OpKind::Backward;
  op.layer = layer;
  op.micro = micro;
  op.deps = {layer == last ? b.find(OpKind::Forward, last, micro)
                           : b.find(OpKind::Backward, layer + 1, micro)};
  // Sharded: the layer's parameters gathered again (or kept from the forward); on disk: read again
  // (or kept).
  if (layer > 0) add_params_deps(b, layer, micro, op.deps);
  // Activation recompute: the block's forward again first, with the same parameters.
  if (layer < static_cast<int>(recomputed_.size()) && recomputed_[layer]) {
    Op re;
    re.kind = OpKind::Recompute;
    re.layer = layer;
    re.micro = micro;
    re.deps = op.deps;
    re.reads = {params(layer)};
    re.writes = {acts(layer)};
    op.deps = {b.add(std::move(re))};
  }
  // The embedding's backward reads no parameters (a scatter-add of the incoming gradient).
  op.reads = {};
  if (layer != 0) op.reads.push_back(params(layer));
  op.reads.push_back(acts(layer));
  if (layer == 0 || layer == last) op.reads.push_back(batch());
  op.writes = {grads(layer)};
  if (layer == last && tied_head_) {
    op.reads.push_back(params(0));
    op.writes.push_back(grads(0));
  }
  b.add(std::move(op));
}

void OptimizerStepOps::add_grad_norm(PlanBuilder& b, int layer) {
  Op op;
  op.kind = OpKind::GradNorm;
  op.layer = layer;
  op.deps = {b.find(OpKind::Backward, layer, b.shape().micro_batches - 1)};
  // Several ranks: the norm of the reduced gradient (this rank's shard of it when sharded).
  for (OpKind k : {OpKind::ReduceScatter, OpKind::AllReduce})
    if (const int reduce = b.find(k, layer); reduce >= 0) op.deps.push_back(reduce);
  op.reads = {grads(layer)};
  b.add(std::move(op));
}

void OptimizerStepOps::backward(PlanBuilder& b, int layer, int micro) {
  if (micro != b.shape().micro_batches - 1) return;
  // A layer whose gradient is still being reduced on the comm lane: its norm waits one layer,
  // until after the next backward, so the compute lane does not stop for the reduction.
  if (deferred_ >= 0) add_grad_norm(b, deferred_);
  deferred_ = -1;
  const bool reduced = b.find(OpKind::ReduceScatter, layer) >= 0 || b.find(OpKind::AllReduce, layer) >= 0;
  if (reduced)
    deferred_ = layer;
  else
    add_grad_norm(b, layer);
}

void OptimizerStepOps::optimizer_begin(PlanBuilder& b) {
  if (deferred_ >= 0) add_grad_norm(b, deferred_);
  deferred_ = -1;
  Op op;
  op.kind = OpKind::ClipGrads;
  op.deps = b.find_all(OpKind::GradNorm);
  b.add(std::move(op));
}

void OptimizerStepOps::optimizer_part(PlanBuilder& b, int layer, BlockRange part) {
  Op op;
  op.kind = OpKind::OptimStep;
  op.layer = layer;
  op.blocks = part;
  op.deps = {b.find(OpKind::ClipGrads)};
  // Parameters on disk: the layer read for its step (the latest read of it; none when it is kept
  // from its last backward).
  if (const int load = b.find(OpKind::ParamLoad, layer); load >= 0) op.deps.push_back(load);
  op.reads = {grads(layer)};
  op.writes = {params(layer), {StateKind::OptimState, layer}, grads(layer)};
  b.add(std::move(op));
}

void add_step_contributors(PlanBuilder& builder, const StepContributors& parts) {
  for (PlanContributor* c : {parts.checkpoint, parts.model, parts.sharding, parts.params, parts.shadow, parts.tiers, parts.optimizer})
    if (c) builder.add_contributor(c);
}

}  // namespace asteria
