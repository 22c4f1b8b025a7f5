#include "train/device_training.hpp"

#include "core/backend.hpp"
#include "core/error.hpp"

#ifdef ASTERIA_HAVE_CUDA
#include <vector>

#include "core/cuda/cuda_context.hpp"
#include "core/cuda/device_buffer.hpp"
#include "core/nvml_energy.hpp"
#include "model/ops/op_set.hpp"
#include "optim/adamw.hpp"
#include "optim/sum_of_squares.hpp"
#include "config/config.hpp"
#include "train/estimates/memory_estimate.hpp"
#include "optim/optimizer_factory.hpp"
#endif

namespace asteria {

#ifdef ASTERIA_HAVE_CUDA

namespace {

// The process's GPU, once it was checked to have room for the run.
std::unique_ptr<Backend> open_device(const Config& cfg) {
  std::string why;
  if (!cuda_backend_available(&why)) fail("runtime.backend cuda: ", why);
  std::unique_ptr<Backend> backend = make_cuda_backend(0);
  check_device_memory(cfg, device_memory(cfg), cuda::device_memory_free(), backend->name());
  return backend;
}

// The device's second-order optimizer: the host optimizer's twin on the CUDA block backend (its
// state is bound to device memory by the trainer's TierManager).
std::unique_ptr<SecondOrderOptimizer> device_twin(const Config& cfg, const Model<float>& image, Optimizer& host) {
  auto* so = dynamic_cast<SecondOrderOptimizer*>(&host);
  if (!so) {
    ASTERIA_CHECK(dynamic_cast<AdamW*>(&host), "runtime.backend cuda: the optimizer is neither AdamW nor second-order");
    return nullptr;
  }
  std::vector<ParamTable> tables;
  for (int l = 0; l < image.num_layers(); ++l) tables.push_back(image.table(l));
  return std::make_unique<SecondOrderOptimizer>(second_order_params(cfg.optim, cfg.runtime.staggered()), tables,
                                                /*own_memory=*/false, cuda_block_backend());
}

class CudaTraining final : public DeviceTraining {
 public:
  CudaTraining(const Config& cfg, Model<float>& image, Optimizer& opt)
      : backend_(open_device(cfg)),
        compute_stream_(backend_->create_stream(StreamPriority::Normal)),
        compute_scope_(static_cast<cudaStream_t>(compute_stream_->native_handle())),
        image_(image),
        host_opt_(opt),
        model_(cfg.model, cfg.train.micro_batch, Model<float, CudaOps>::Storage::Owned, cfg.train.recompute(),
               cfg.runtime.precision),
        second_order_(device_twin(cfg, image, opt)) {}

  std::string device_name() const override { return backend_->name(); }

  double dense_bf16_peak_flops() const override {
    const std::string name = device_name();
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
    model_.backward(l, grad_scale);
    cuda::synchronize_current_stream();
  }
  double last_ce_loss() const override { return model_.last_ce_loss(); }
  double last_z_loss() const override { return model_.last_z_loss(); }
  double eval_loss(const int32_t* inputs, const int32_t* targets) override {
    model_.set_batch(inputs, targets);
    for (int l = 0; l < model_.num_layers(); ++l) forward(l);
    return model_.last_ce_loss();
  }

  double grad_sum_of_squares(int l) override { return cuda::sum_of_squares(model_.grads(l), model_.table(l).numel); }
  float* grads(int l) override { return model_.grads(l); }

  void optim_step(int l, BlockRange blocks, float grad_scale, double lr, int64_t step) override {
    float* g = model_.grads(l);
    if (second_order_) {
      second_order_->step_part(l, blocks, model_.params(l), g, grad_scale, lr, step);
    } else {
      static_cast<AdamW&>(host_opt_).step_layer_with(l, model_.params(l), g, grad_scale, lr, step,
                                                     [](auto... args) { cuda::adamw_update(args...); });
    }
    if (blocks.end < 0) CudaOps::zero(g, model_.table(l).numel);   // after the layer's last part
    cuda::synchronize_current_stream();
  }

  void upload() override {
    for (int l = 0; l < model_.num_layers(); ++l)
      CudaOps::to_device(model_.params(l), image_.params(l), image_.table(l).numel);
    if (second_order_) second_order_->restore_counters(host_opt_.counters());
    cuda::synchronize_current_stream();
  }

  void download() override {
    download_params();
    if (second_order_) host_opt_.restore_counters(second_order_->counters());
  }

  void download_params() override {
    for (int l = 0; l < model_.num_layers(); ++l)
      CudaOps::to_host(image_.params(l), model_.params(l), image_.table(l).numel);
  }

  SecondOrderOptimizer* second_order() override { return second_order_.get(); }
  Backend& backend() override { return *backend_; }
  Optimizer& device_optimizer() override { return second_order_ ? *second_order_ : host_opt_; }

  std::optional<double> energy_j() const override { return energy_.joules(); }

 private:
  std::unique_ptr<Backend> backend_;   // first: opening it is what fails without a device
  // The training's stream (the greatest priority, so that the tiers' copies, the snapshots and
  // the device lane's refreshes, all on low-priority streams, fill its gaps instead of delaying
  // it), current on this thread from before the model's allocation to the end.
  std::unique_ptr<Stream> compute_stream_;
  cuda::StreamScope compute_scope_;
  Model<float>& image_;
  Optimizer& host_opt_;
  Model<float, CudaOps> model_;
  std::unique_ptr<SecondOrderOptimizer> second_order_;   // on the device (null: AdamW)
  NvmlEnergy energy_{cuda::current_device_pci_bus_id()};   // the GPU this process computes on
};

}  // namespace

std::unique_ptr<DeviceTraining> make_device_training(const Config& cfg, Model<float>& image, Optimizer& optimizer) {
  return std::make_unique<CudaTraining>(cfg, image, optimizer);
}

#else  // a build without the CUDA backend

std::unique_ptr<DeviceTraining> make_device_training(const Config&, Model<float>&, Optimizer&) {
  std::string why;
  cuda_backend_available(&why);
  fail("runtime.backend cuda: ", why);
}

#endif

}  // namespace asteria
