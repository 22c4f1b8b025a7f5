#pragma once
// What a training target does with a sharded model (distributed.fsdp full / hybrid; ZeRO-3,
// docs/DESIGN.md "FSDP"), once for both: the host's (HostTraining: Sharding's shards in host
// memory) and the device's (CudaTraining: fsdp/device_shards.hpp). The model runs on whole-layer
// buffers bound in flight: gather(l) fills a parameter buffer from the shards and binds it,
// release(l) unbinds it; before backward(l) a zeroed gradient buffer is bound (and the
// embedding's for the tied head), which the reduce-scatter sums into this rank's shard and
// releases. The buffers come from two pools of whole layers (fsdp/layer_slots.hpp).
//
// Shards: Sharding or DeviceShards (the same gather / reduce_scatter / reduce_shard_over_replicas
// on their memory); Ops: the model's op set (its zero() clears a gradient buffer).
#include <string>

#include "core/step_metrics.hpp"
#include "fsdp/layer_slots.hpp"
#include "model/model.hpp"
#include "runtime/executor.hpp"

namespace asteria {

template <class Ops, class Shards>
class ShardedLayers {
 public:
  ShardedLayers(Model<float, Ops>& model, Shards& shards, LayerSlots& params, LayerSlots& grads)
      : model_(model), shards_(shards), params_(params), grads_(grads), tied_(model.config().tied_embeddings) {}

  void gather(int l, const char* why) {
    float* whole = params_.acquire(l, model_.layer_name(l));
    shards_.gather(l, whole, "gather of " + model_.layer_name(l) + why);
    model_.bind_params(l, whole);
  }
  void release(int l) {
    model_.bind_params(l, nullptr);
    params_.release(l);
  }
  // Before backward(l): a zeroed gradient buffer for the layer (and the embedding's, for the tied head).
  void bind_grad_buffers(int l) {
    bind_grad_buffer(l);
    if (l == model_.num_layers() - 1 && tied_) bind_grad_buffer(0);
  }

  // The comm lane's handlers (gather, release, reduce_scatter); the reduce_scatter of the last
  // of `micro_batches` also reduces the shard over the replicas (hybrid) and scales it to the
  // mean over every rank.
  void bind_ops(Executor& executor, int micro_batches) {
    executor.bind(OpKind::Gather, [this](const Op& op) { gather(op.layer, ""); });
    executor.bind(OpKind::Release, [this](const Op& op) { release(op.layer); });
    executor.bind(OpKind::ReduceScatter, [this, micro_batches](const Op& op) {
      const std::string what = "the gradient of " + model_.layer_name(op.layer);
      shards_.reduce_scatter(op.layer, model_.grads(op.layer), "reduce_scatter of " + what);
      model_.bind_grads(op.layer, nullptr);
      grads_.release(op.layer);
      if (op.micro == micro_batches - 1) shards_.reduce_shard_over_replicas(op.layer, "all_reduce of " + what);
    });
  }

  // Between steps (the comm lane idle, so the calling lane gathers): forward(l) of every layer
  // on its gathered parameters, the embedding kept until the tied head has read it.
  template <class Forward>
  void forward_gathered(Forward forward) {
    const int L = model_.num_layers();
    for (int l = 0; l < L; ++l) {
      gather(l, " for eval");
      forward(l);
      if (!(tied_ && l == 0)) release(l);
    }
    if (tied_) release(0);
  }

  // Rank 0's most whole-layer buffers held at once this step (of the pools' sizes).
  void record_metrics(StepMetrics& m) {
    m.local("fsdp_buffers_held", {{"params", params_.take_peak_held()}, {"grads", grads_.take_peak_held()}});
  }

 private:
  void bind_grad_buffer(int l) {
    if (model_.grads(l)) return;
    float* g = grads_.acquire(l, model_.layer_name(l));
    Ops::zero(g, model_.table(l).numel);
    model_.bind_grads(l, g);
  }

  Model<float, Ops>& model_;
  Shards& shards_;
  LayerSlots& params_;
  LayerSlots& grads_;
  bool tied_;
};

}  // namespace asteria
