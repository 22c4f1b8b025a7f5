#include "train/device_training.hpp"

#include "core/backend.hpp"
#include "core/error.hpp"

#ifdef ASTERIA_HAVE_CUDA
#include <vector>

#include "core/cuda/device_buffer.hpp"
#include "core/nvml_energy.hpp"
#include "model/ops/op_set.hpp"
#include "optim/adamw.hpp"
#include "optim/sum_of_squares.hpp"
#include "train/config.hpp"
#endif

namespace asteria {

#ifdef ASTERIA_HAVE_CUDA

namespace {

std::unique_ptr<Backend> open_device() {
  std::string why;
  if (!cuda_backend_available(&why)) fail("runtime.backend cuda: ", why);
  return make_cuda_backend(0);
}

AdamW& as_adamw(Optimizer& o) {
  auto* a = dynamic_cast<AdamW*>(&o);
  ASTERIA_CHECK(a, "runtime.backend cuda: the optimizer on the device is AdamW only in this version");
  return *a;
}

// Ops: CudaOps (runtime.precision fp32) or CudaBf16Ops (bf16).
template <class Ops>
class CudaTraining final : public DeviceTraining {
 public:
  CudaTraining(const Config& cfg, Model<float>& image, Optimizer& opt)
      : backend_(open_device()),
        image_(image),
        adamw_(as_adamw(opt)),
        model_(cfg.model, cfg.train.micro_batch, Model<float, Ops>::Storage::Owned, cfg.train.checkpointing()) {
    state_.resize(model_.num_layers());
    for (int l = 0; l < model_.num_layers(); ++l) {
      CudaOps::to_device(model_.params(l), image_.params(l), image_.table(l).numel);
      LayerState& s = state_[l];
      s.host = adamw_.layer_states(l);
      std::vector<float*> copies;
      for (StateTensor* t : s.host) {
        s.copies.emplace_back(t->size());
        CudaOps::to_device(s.copies.back().data(), t->data(), t->size());
        copies.push_back(s.copies.back().data());
      }
      s.where = AdamW::state_copies(copies);
    }
  }

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

  double grad_sum_of_squares(int l) override { return cuda::sum_of_squares(model_.grads(l), model_.table(l).numel); }

  void optim_step(int l, float grad_scale, double lr, int64_t step) override {
    float* g = model_.grads(l);
    adamw_.step_copies(l, state_[l].where, model_.params(l), g, grad_scale, lr, step,
                       [](auto... args) { cuda::adamw_update(args...); });
    CudaOps::zero(g, model_.table(l).numel);
    cuda::synchronize_current_stream();
  }

  void download() override {
    for (int l = 0; l < model_.num_layers(); ++l) {
      CudaOps::to_host(image_.params(l), model_.params(l), image_.table(l).numel);
      const LayerState& s = state_[l];
      for (size_t i = 0; i < s.host.size(); ++i) CudaOps::to_host(s.host[i]->data(), s.copies[i].data(), s.host[i]->size());
    }
  }

  std::optional<double> energy_j() const override { return energy_.joules(); }

 private:
  // One device copy of each of a layer's state tensors (the optimizer's layer_states order).
  struct LayerState {
    std::vector<cuda::DeviceBuffer<float>> copies;
    std::vector<StateTensor*> host;
    AdamW::StateCopies where;   // the copies' roles
  };

  std::unique_ptr<Backend> backend_;   // first: opening it is what fails without a device
  Model<float>& image_;
  AdamW& adamw_;
  Model<float, Ops> model_;
  std::vector<LayerState> state_;
  NvmlEnergy energy_{0};
};

}  // namespace

std::unique_ptr<DeviceTraining> make_device_training(const Config& cfg, Model<float>& image, Optimizer& optimizer) {
  if (cfg.runtime.precision == "bf16") return std::make_unique<CudaTraining<CudaBf16Ops>>(cfg, image, optimizer);
  return std::make_unique<CudaTraining<CudaOps>>(cfg, image, optimizer);
}

#else  // a build without the CUDA backend

std::unique_ptr<DeviceTraining> make_device_training(const Config&, Model<float>&, Optimizer&) {
  std::string why;
  cuda_backend_available(&why);
  fail("runtime.backend cuda: ", why);
}

#endif

}  // namespace asteria
