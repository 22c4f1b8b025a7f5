#pragma once
// What a training step runs the model and the optimizer's update on: the host (HostTraining:
// the CPU model, whole or sharded over the ranks) or the device (DeviceTraining, runtime.backend
// cuda). The step's op handlers (train/step_handlers.cpp) call only this, so they never branch
// on the backend.
//
// Every call returns when its work is done (on the device: when the device has run it), so the
// plan's op times are the work's. The gradient of a layer is complete once backward(l) of the
// step's last micro-batch returned; optim_step(l, blocks) steps those blocks of layer l with it
// (the whole layer, or one of the tiers' parts of it, in order) and, after the layer's last
// part, zeroes it for the next step.
#include <cstdint>
#include <optional>
#include <string>

#include "core/step_metrics.hpp"
#include "optim/block_range.hpp"

namespace asteria {

class Backend;
class Executor;
class Optimizer;

// The peak rate the mfu metric is measured against, and how it was found (run_info.json).
struct PeakFlops {
  double flops = 0;   // 0: unknown
  std::string formula;
};

class TrainingTarget {
 public:
  virtual ~TrainingTarget() = default;

  // What computes: "cpu", "cuda:0 (NVIDIA H200)".
  virtual std::string name() const = 0;
  // The compute's peak rate with `threads` compute threads (the CPU's) for the mfu metric.
  virtual PeakFlops peak_flops(int threads) const = 0;
  // Where the optimizer state's memory is allocated (the tier manager's backend: the host's, or
  // the device whose memory is its device tier).
  virtual Backend& backend() = 0;
  // The optimizer that steps the parameters, whose state tensors the tier manager binds: the
  // trainer's own (CPU), or the device's (a second-order twin on the GPU, or the host AdamW
  // whose state tensors are bound to device memory). The shadow pipeline refreshes its blocks
  // when it is a SecondOrderOptimizer.
  virtual Optimizer& stepping_optimizer() = 0;
  // The host image's parameters and the optimizer's counters onto the target (after a resume
  // restored them); returns when the copy is complete. The host's image is the model itself.
  virtual void upload() {}

  // The model (model/model.hpp's contract).
  virtual void set_batch(const int32_t* inputs, const int32_t* targets) = 0;
  virtual double forward(int l) = 0;          // the mean loss when l is the head, else 0
  virtual void recompute(int l) = 0;
  virtual void backward(int l, double grad_scale) = 0;
  virtual double last_ce_loss() const = 0;
  virtual double last_z_loss() const = 0;

  // Layer l's whole gradient (table(l).numel floats): what the replicas' all-reduce sums in
  // place. Sharded runs reduce into shards instead and never call it.
  virtual float* grads(int l) = 0;
  // The sum of squares of the gradient this rank steps layer l with (its shard when sharded).
  virtual double grad_sum_of_squares(int l) = 0;
  virtual void optim_step(int l, BlockRange blocks, float clip_scale, double lr, int64_t step) = 0;

  // The mean cross-entropy of one eval batch (forward only, between steps).
  virtual double eval_loss(const int32_t* inputs, const int32_t* targets) = 0;

  // The host image (the trainer's model and optimizer counters) brought up to date: only the
  // parameters (what the replicas' check hashes), or everything (before a checkpoint and at the
  // end). The host's image is the model itself: nothing to do.
  virtual void download_params() {}
  virtual void download() {}

  // Energy used since a counter started, when there is one: the GPU's (NVML) on the device, the
  // CPU packages' (RAPL, every process on them) on the host; energy_source() names it, or says
  // why there is none (run_info.json's "energy").
  virtual std::optional<double> energy_j() const { return std::nullopt; }
  virtual std::string energy_source() const { return "none"; }

  // Sharded runs (fsdp full, hybrid): binds the plan's Gather, Release and ReduceScatter ops
  // (fsdp/sharding_plan_ops.hpp), run on the comm lane, to this target's memory; the gradient
  // is then reduced into its shards, and grads(l) is not called.
  virtual void bind_sharded_ops(Executor& executor, int micro_batches) = 0;

  // Figures of the step that only the target knows (fsdp buffers held, ...).
  virtual void record_metrics(StepMetrics&) {}
};

}  // namespace asteria
