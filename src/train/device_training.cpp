#include "train/device_training.hpp"

#include "core/backend.hpp"
#include "core/error.hpp"

#ifdef ASTERIA_HAVE_CUDA
#include <vector>

#include "core/cuda/cuda_context.hpp"
#include "core/cuda/device_buffer.hpp"
#include "core/nvml_energy.hpp"
#include "comm/nccl_communicator.hpp"
#include "fsdp/device_shards.hpp"
#include "fsdp/sharding.hpp"
#include "fsdp/sharding_plan_ops.hpp"
#include "train/sharded_layers.hpp"
#include "model/ops/op_set.hpp"
#include "optim/adamw.hpp"
#include "optim/second_order.hpp"
#include "optim/sum_of_squares.hpp"
#include "config/config.hpp"
#include "train/estimates/memory_estimate.hpp"
#include "optim/optimizer_factory.hpp"
#endif

namespace asteria {

#ifdef ASTERIA_HAVE_CUDA

namespace {

// The process's GPU, once it was checked to have room for the run (a sharded rank's share:
// the estimate plans the launch's world).
std::unique_ptr<Backend> open_device(const Config& cfg, const Sharding& sharding) {
  std::string why;
  if (!cuda_backend_available(&why)) fail("runtime.backend cuda: ", why);
  std::unique_ptr<Backend> backend = make_cuda_backend(0);
  const Config launch = planned_launch(cfg, sharding.world_size(),
                                      sharding.mode() == FsdpMode::Hybrid ? sharding.group_size() : sharding.world_size());
  check_device_memory(launch, device_memory(launch), cuda::device_memory_free(), backend->name());
  return backend;
}

// The device's second-order optimizer: the host optimizer's twin on the CUDA block backend, on
// the same tables (a sharded rank's shards, following the whole model's block indices); its
// state is bound to device memory by the trainer's TierManager.
std::unique_ptr<SecondOrderOptimizer> device_twin(const Config& cfg, const Model<float>& image, const Sharding& sharding,
                                                  Optimizer& host) {
  auto* so = dynamic_cast<SecondOrderOptimizer*>(&host);
  if (!so) {
    ASTERIA_CHECK(dynamic_cast<AdamW*>(&host), "runtime.backend cuda: the optimizer is neither AdamW nor second-order");
    return nullptr;
  }
  auto twin = std::make_unique<SecondOrderOptimizer>(second_order_params(cfg.optim, cfg.runtime.staggered()),
                                                     sharding.owned_tables(), /*own_memory=*/false, cuda_block_backend());
  if (sharding.sharded()) {
    std::vector<ParamTable> whole;
    for (int l = 0; l < image.num_layers(); ++l) whole.push_back(image.table(l));
    twin->follow_whole_model(whole);
  }
  return twin;
}

// Sharded: the rank's shards and the layers in flight in device memory, the collectives over
// NCCL communicators of the host's shard and replica groups (null when not sharded).
std::unique_ptr<DeviceShards> device_shards(const Config& cfg, Sharding& sharding, Backend& device, ShardVectorOps& ops) {
  if (!sharding.sharded()) return nullptr;
  const int L = static_cast<int>(sharding.owned_tables().size());
  const bool tied = cfg.model.tied_embeddings;
  std::unique_ptr<Communicator> group = make_nccl_communicator(sharding.group(), /*device=*/0);
  std::unique_ptr<Communicator> replicas = sharding.replicas() ? make_nccl_communicator(*sharding.replicas(), 0) : nullptr;
  return std::make_unique<DeviceShards>(sharding, device, ops, std::move(group), std::move(replicas),
                                        ShardingPlanOps::param_buffers(cfg.distributed.prefetch, L, tied),
                                        ShardingPlanOps::grad_buffers(tied), cfg.distributed.timeout_s);
}

class CudaTraining final : public TrainingTarget {
 public:
  CudaTraining(const Config& cfg, Model<float>& image, Optimizer& opt, Sharding& sharding)
      : backend_(open_device(cfg, sharding)),
        compute_stream_(backend_->create_stream(StreamPriority::Normal)),
        compute_scope_(static_cast<cudaStream_t>(compute_stream_->native_handle())),
        image_(image),
        host_opt_(opt),
        sharding_(sharding),
        model_(cfg.model, cfg.train.micro_batch,
               sharding.sharded() ? Model<float, CudaOps>::Storage::Bound : Model<float, CudaOps>::Storage::Owned,
               cfg.train.recompute(), cfg.runtime.precision),
        second_order_(device_twin(cfg, image, sharding, opt)),
        vector_ops_(make_cuda_shard_vector_ops()),
        shards_(device_shards(cfg, sharding, *backend_, *vector_ops_)),
        layers_(shards_ ? std::make_unique<ShardedLayers<CudaOps, DeviceShards>>(
                              model_, *shards_, shards_->params_in_flight(), shards_->grads_in_flight())
                        : nullptr) {}

  std::string name() const override { return backend_->name(); }

  PeakFlops peak_flops(int /*threads*/) const override {
    const double flops = dense_bf16_peak_flops();
    return {flops, flops > 0 ? "the GPU's dense bf16 tensor-core peak" : "unknown GPU: set run.peak_flops"};
  }

  double dense_bf16_peak_flops() const {
    const std::string name = backend_->name();
    struct Known {
      const char* part;
      double flops;
    };
    // Dense (no sparsity) bf16 tensor-core peaks of the SXM / superchip parts; GH200 before H200.
    for (const Known& k : {Known{"GH200", 989e12}, Known{"H100", 989e12}, Known{"H200", 989e12},
                           Known{"B200", 2250e12}, Known{"A100", 312e12}, Known{"L40S", 362e12}})
      if (name.find(k.part) != std::string::npos) return k.flops;
    return 0;
  }

  // Each op returns when the device has run it, so that the executor's op times (fwd_s, bwd_s,
  // optim_s, ...) are the device's and not the time to queue it; one sync per op costs
  // microseconds against milliseconds of work.
  void set_batch(const int32_t* inputs, const int32_t* targets) override { model_.set_batch(inputs, targets); }
  double forward(int l) override {
    const double loss = model_.forward(l);
    cuda::synchronize_current_stream();
    return loss;
  }
  void recompute(int l) override {
    model_.recompute(l);
    cuda::synchronize_current_stream();
  }
  void backward(int l, double grad_scale) override {
    if (layers_) layers_->bind_grad_buffers(l);
    model_.backward(l, grad_scale);
    cuda::synchronize_current_stream();
  }
  double last_ce_loss() const override { return model_.last_ce_loss(); }
  double last_z_loss() const override { return model_.last_z_loss(); }
  double eval_loss(const int32_t* inputs, const int32_t* targets) override {
    model_.set_batch(inputs, targets);
    if (layers_) {
      layers_->forward_gathered([this](int l) { forward(l); });
    } else {
      for (int l = 0; l < model_.num_layers(); ++l) forward(l);
    }
    return model_.last_ce_loss();
  }

  double grad_sum_of_squares(int l) override {
    return shards_ ? shards_->grad_sum_of_squares(l) : cuda::sum_of_squares(model_.grads(l), model_.table(l).numel);
  }
  float* grads(int l) override { return model_.grads(l); }

  // The step's parameters and gradient: this rank's shards when sharded, else the whole layer.
  void optim_step(int l, BlockRange blocks, float grad_scale, double lr, int64_t step) override {
    float* p = shards_ ? shards_->shard_params(l) : model_.params(l);
    float* g = shards_ ? shards_->shard_grads(l) : model_.grads(l);
    if (second_order_) {
      second_order_->step_part(l, blocks, p, g, grad_scale, lr, step);
    } else {
      static_cast<AdamW&>(host_opt_).step_layer_with(l, p, g, grad_scale, lr, step,
                                                     [](auto... args) { cuda::adamw_update(args...); });
    }
    if (blocks.end < 0) CudaOps::zero(g, sharding_.count(l));   // after the layer's last part
    cuda::synchronize_current_stream();
  }

  void bind_sharded_ops(Executor& executor, int micro_batches) override { layers_->bind_ops(executor, micro_batches); }

  void record_metrics(StepMetrics& m) override {
    if (layers_) layers_->record_metrics(m);
  }

  void upload() override {
    if (shards_) {
      shards_->upload();
    } else {
      for (int l = 0; l < model_.num_layers(); ++l)
        CudaOps::to_device(model_.params(l), image_.params(l), image_.table(l).numel);
    }
    if (second_order_) second_order_->restore_counters(host_opt_.counters());
    cuda::synchronize_current_stream();
  }

  void download() override {
    download_params();
    if (second_order_) host_opt_.restore_counters(second_order_->counters());
  }

  // Sharded: the shards into the host's (Sharding::shard_params), the image checkpoints are
  // written from.
  void download_params() override {
    if (shards_) {
      shards_->download();
      return;
    }
    for (int l = 0; l < model_.num_layers(); ++l)
      CudaOps::to_host(image_.params(l), model_.params(l), image_.table(l).numel);
  }

  Backend& backend() override { return *backend_; }
  Optimizer& stepping_optimizer() override { return second_order_ ? *second_order_ : host_opt_; }

  std::optional<double> energy_j() const override { return energy_.joules(); }
  std::string energy_source() const override {
    return energy_.available() ? "NVML: the GPU's energy counter" : "no GPU energy counter: " + energy_.why_not();
  }

 private:
  std::unique_ptr<Backend> backend_;   // first: opening it is what fails without a device
  // The training's stream (the greatest priority, so that the tiers' copies, the snapshots and
  // the device lane's refreshes, all on low-priority streams, fill its gaps instead of delaying
  // it), current on this thread from before the model's allocation to the end.
  std::unique_ptr<Stream> compute_stream_;
  cuda::StreamScope compute_scope_;
  Model<float>& image_;
  Optimizer& host_opt_;
  Sharding& sharding_;
  Model<float, CudaOps> model_;
  std::unique_ptr<SecondOrderOptimizer> second_order_;   // on the device (null: AdamW)
  std::unique_ptr<ShardVectorOps> vector_ops_;
  std::unique_ptr<DeviceShards> shards_;                 // sharded (fsdp full, hybrid), else null
  std::unique_ptr<ShardedLayers<CudaOps, DeviceShards>> layers_;   // with shards_
  NvmlEnergy energy_{cuda::current_device_pci_bus_id()};   // the GPU this process computes on
};

}  // namespace

std::unique_ptr<TrainingTarget> make_device_training(const Config& cfg, Model<float>& image, Optimizer& optimizer,
                                                     Sharding& sharding) {
  return std::make_unique<CudaTraining>(cfg, image, optimizer, sharding);
}

#else  // a build without the CUDA backend

std::unique_ptr<TrainingTarget> make_device_training(const Config&, Model<float>&, Optimizer&, Sharding&) {
  std::string why;
  cuda_backend_available(&why);
  fail("runtime.backend cuda: ", why);
}

#endif

}  // namespace asteria
