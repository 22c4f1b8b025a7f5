#include "train/host_training.hpp"

#include <algorithm>
#include <string>

#include "core/error.hpp"
#include "fsdp/sharding_plan_ops.hpp"
#include "model/ops/op_set.hpp"
#include "optim/sum_of_squares.hpp"
#include "train/estimates/flops.hpp"

namespace asteria {

HostTraining::HostTraining(Model<float>& model, Optimizer& optimizer, Sharding& sharding, int prefetch, double timeout_s,
                           bool init_only, OffloadedParams* offloaded)
    : model_(model), optimizer_(optimizer), sharding_(sharding) {
  ASTERIA_ASSERT(!offloaded || (!sharding_.sharded() && !init_only), "parameters on disk in a sharded or device run");
  if (offloaded) offloaded_ = std::make_unique<OffloadedLayers>(model_, *offloaded);
  if (!sharding_.sharded()) return;
  const int L = model_.num_layers();
  const bool tied = model.config().tied_embeddings;
  param_slots_ = std::make_unique<LayerSlots>("parameter", init_only ? 1 : ShardingPlanOps::param_buffers(prefetch, L, tied),
                                              sharding_.largest_layer(), timeout_s);
  if (init_only) return;
  grad_slots_ = std::make_unique<LayerSlots>("gradient", ShardingPlanOps::grad_buffers(tied), sharding_.largest_layer(),
                                             timeout_s);
  layers_ = std::make_unique<ShardedLayers<CpuOps, Sharding>>(model_, sharding_, *param_slots_, *grad_slots_);
}

PeakFlops HostTraining::peak_flops(int threads) const {
  return {cpu_peak_flops(threads), "threads x cpu MHz x " + std::to_string(cpu_fma_flops_per_cycle()) +
                                       " fp32 FLOP/cycle (two FMA units of the CPU's width)"};
}

void HostTraining::init(uint64_t seed) {
  if (offloaded_) {
    offloaded_->init(seed);
    return;
  }
  if (!sharding_.sharded()) {
    model_.init(seed);
    return;
  }
  for (int l = 0; l < model_.num_layers(); ++l) {
    float* whole = param_slots_->acquire(l, model_.layer_name(l));
    model_.bind_params(l, whole);
    model_.init_layer(l, seed);
    std::copy(whole + sharding_.offset(l), whole + sharding_.offset(l) + sharding_.count(l), sharding_.shard_params(l));
    model_.bind_params(l, nullptr);
    param_slots_->release(l);
  }
}

void HostTraining::init_from(const ParamSource& source) {
  if (offloaded_) {
    offloaded_->init_from(source);
    return;
  }
  for (int l = 0; l < model_.num_layers(); ++l) {
    if (sharding_.sharded())
      source.fill(l, sharding_.offset(l), sharding_.count(l), sharding_.shard_params(l));
    else
      source.fill(l, 0, model_.table(l).numel, model_.params(l));
  }
}

void HostTraining::bind_sharded_ops(Executor& executor, int micro_batches) { layers_->bind_ops(executor, micro_batches); }

void HostTraining::bind_offload_ops(Executor& executor) {
  offloaded_->bind_ops(executor);
  executor_ = &executor;
}

std::vector<float> HostTraining::params(int l) {
  if (offloaded_) return offloaded_->params(l);
  const float* p = model_.params(l);
  return std::vector<float>(p, p + model_.table(l).numel);
}

void HostTraining::backward(int l, double grad_scale) {
  if (layers_) layers_->bind_grad_buffers(l);
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
  model_.set_batch(inputs, targets);
  if (layers_) {
    layers_->forward_gathered([this](int l) { model_.forward(l); });
  } else if (offloaded_) {
    offloaded_->forward_all([this](int l) { model_.forward(l); });
  } else {
    for (int l = 0; l < model_.num_layers(); ++l) model_.forward(l);
  }
  return model_.last_ce_loss();
}

void HostTraining::record_metrics(StepMetrics& m) {
  if (layers_) layers_->record_metrics(m);
  if (offloaded_ && executor_) offloaded_->record_metrics(m, *executor_);
}

}  // namespace asteria
