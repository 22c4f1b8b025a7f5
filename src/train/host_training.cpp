#include "train/host_training.hpp"

#include <algorithm>
#include <string>

#include "fsdp/sharding_plan_ops.hpp"
#include "optim/sum_of_squares.hpp"

namespace asteria {

HostTraining::HostTraining(Model<float>& model, Optimizer& optimizer, Sharding& sharding, int prefetch, double timeout_s,
                           bool init_only)
    : model_(model), optimizer_(optimizer), sharding_(sharding), tied_(model.config().tied_embeddings) {
  if (!sharding_.sharded()) return;
  const int L = model_.num_layers();
  param_slots_ = std::make_unique<LayerSlots>("parameter", init_only ? 1 : ShardingPlanOps::param_buffers(prefetch, L, tied_),
                                              sharding_.largest_layer(), timeout_s);
  if (init_only) return;
  grad_slots_ = std::make_unique<LayerSlots>("gradient", ShardingPlanOps::grad_buffers(tied_), sharding_.largest_layer(),
                                             timeout_s);
}

void HostTraining::init(uint64_t seed) {
  if (!sharding_.sharded()) {
    model_.init(seed);
    return;
  }
  for (int l = 0; l < model_.num_layers(); ++l) {
    float* whole = param_slots_->acquire(l, model_.layer_name(l));
    model_.bind_params(l, whole);
    model_.init_layer(l, seed);
    std::copy(whole + sharding_.offset(l), whole + sharding_.offset(l) + sharding_.count(l), sharding_.shard_params(l));
    release(l);
  }
}

void HostTraining::bind_sharded_ops(Executor& executor, int micro_batches) {
  executor.bind(OpKind::Gather, [this](const Op& op) { gather(op.layer, ""); });
  executor.bind(OpKind::Release, [this](const Op& op) { release(op.layer); });
  // The group's sum of this rank's part of the micro-batch's gradient, into its shard; after the
  // last micro-batch the mean over every rank.
  executor.bind(OpKind::ReduceScatter, [this, micro_batches](const Op& op) {
    const std::string what = "the gradient of " + model_.layer_name(op.layer);
    sharding_.reduce_scatter(op.layer, model_.grads(op.layer), "reduce_scatter of " + what);
    model_.bind_grads(op.layer, nullptr);
    grad_slots_->release(op.layer);
    if (op.micro == micro_batches - 1)
      sharding_.reduce_over_replicas(op.layer, sharding_.shard_grads(op.layer), "all_reduce of " + what);
  });
}

void HostTraining::backward(int l, double grad_scale) {
  if (grad_slots_) {
    // Sharded: a zeroed gradient buffer for the layer (and the embedding's, for the tied head).
    bind_grad_buffer(l);
    if (l == model_.num_layers() - 1 && tied_) bind_grad_buffer(0);
  }
  model_.backward(l, grad_scale);
}

double HostTraining::grad_sum_of_squares(int l) {
  const float* g = sharding_.sharded() ? sharding_.shard_grads(l) : model_.grads(l);
  return sum_of_squares(g, sharding_.count(l));
}

void HostTraining::optim_step(int l, BlockRange blocks, float clip_scale, double lr, int64_t step) {
  const bool last_part = blocks.end < 0;   // the tiers' last part of a layer ends at its last block
  if (sharding_.sharded()) {
    optimizer_.step_part(l, blocks, sharding_.shard_params(l), sharding_.shard_grads(l), clip_scale, lr, step);
    if (last_part) sharding_.zero_shard_grads(l);
    return;
  }
  float* g = model_.grads(l);
  optimizer_.step_part(l, blocks, model_.params(l), g, clip_scale, lr, step);
  if (last_part) std::fill(g, g + model_.table(l).numel, 0.0f);
}

double HostTraining::eval_loss(const int32_t* inputs, const int32_t* targets) {
  const int L = model_.num_layers();
  const bool sharded = sharding_.sharded();
  model_.set_batch(inputs, targets);
  for (int l = 0; l < L; ++l) {
    // Sharded: each layer gathered for its forward (no step is running: the compute lane calls
    // the communicator), the embedding kept until the tied head has read it.
    if (sharded) gather(l, " for eval");
    model_.forward(l);
    if (sharded && !(tied_ && l == 0)) release(l);
  }
  if (sharded && tied_) release(0);
  return model_.last_ce_loss();
}

void HostTraining::record_metrics(StepMetrics& m) {
  // Rank 0's most whole-layer buffers held at once this step (of the pools' sizes).
  if (param_slots_)
    m.local("fsdp_buffers_held", {{"params", param_slots_->take_peak_held()}, {"grads", grad_slots_->take_peak_held()}});
}

void HostTraining::gather(int l, const char* why) {
  float* whole = param_slots_->acquire(l, model_.layer_name(l));
  sharding_.gather(l, whole, "gather of " + model_.layer_name(l) + why);
  model_.bind_params(l, whole);
}

void HostTraining::release(int l) {
  model_.bind_params(l, nullptr);
  param_slots_->release(l);
}

void HostTraining::bind_grad_buffer(int l) {
  if (model_.grads(l)) return;
  float* g = grad_slots_->acquire(l, model_.layer_name(l));
  std::fill(g, g + model_.table(l).numel, 0.0f);
  model_.bind_grads(l, g);
}

}  // namespace asteria
