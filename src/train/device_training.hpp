#pragma once
// The CUDA backend's side of a training run (runtime.backend cuda; DESIGN.md "Backends"): the
// model on the device (Model<float, CudaOps>: parameters, gradients and activations in device
// memory) and AdamW's update on device copies of its state, the same adamw_update operations
// over the same ranges as the CPU's (AdamW::step_copies).
//
// The trainer's host model (Storage::Image: parameters only) and its optimizer stay the run's
// image: the device starts from them (so a resume restores into them first), and checkpoints and
// the final parameters are read from them after download(). Everything else the trainer has
// (plan, executor, data, metrics, checkpoints) is the CPU run's, unchanged.
//
// This version: one rank, AdamW, fp32 values with the linear layers' GEMMs on fp32 or (runtime.precision
// bf16, the default) bf16 operands, the legacy default stream (config.cpp
// check_supported refuses what it does not cover, with the reason).
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "model/model.hpp"
#include "optim/optimizer.hpp"

namespace asteria {

struct Config;

class DeviceTraining {
 public:
  virtual ~DeviceTraining() = default;

  virtual std::string device_name() const = 0;   // "cuda:0 (NVIDIA H200)"
  // The device's dense bf16 peak in FLOP/s when its name is one this knows (H100/H200/GH200
  // 989e12, A100 312e12, B200 2250e12, L40S 362e12), else 0: the reference of the mfu metric.
  virtual double dense_bf16_peak_flops() const = 0;

  // The model's contract (model.hpp), run on the device. Every op returns when the device has
  // run it (so the plan's op times are the device's).
  virtual void set_batch(const int32_t* inputs, const int32_t* targets) = 0;
  virtual double forward(int l) = 0;
  virtual void recompute(int l) = 0;
  virtual void backward(int l, double grad_scale) = 0;
  virtual double last_ce_loss() const = 0;
  virtual double last_z_loss() const = 0;

  // Layer l's gradient: its sum of squares (the grad_norm op; returns once on the host), and the
  // optimizer's step of layer l with it, which then zeroes it (as the CPU's optim_step does).
  virtual double grad_sum_of_squares(int l) = 0;
  virtual void optim_step(int l, float grad_scale, double lr, int64_t step) = 0;

  // The device's parameters and optimizer state into the image; returns when they are there.
  virtual void download() = 0;
  // Energy the device used since its driver loaded (NVML), when it has the counter.
  virtual std::optional<double> energy_j() const = 0;
};

// Uploads the image. Throws, naming the reason, when this build has no CUDA backend, no device
// can be opened, the optimizer is not AdamW, or the device memory is short.
std::unique_ptr<DeviceTraining> make_device_training(const Config& cfg, Model<float>& image, Optimizer& optimizer);

}  // namespace asteria
