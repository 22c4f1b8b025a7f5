#pragma once
// The CPU backend's TrainingTarget: the host model and the optimizer's step on this rank's part
// of every layer (all of it, or its shards under distributed.fsdp full/hybrid).
//
// Sharded (ZeRO-3), the model runs on whole-layer buffers bound in flight, gathered from and
// reduced into Sharding's shards (train/sharded_layers.hpp), from two pools sized by the plan's
// prefetch distance. With parameters on the disk tier (one process), on the buffers of
// OffloadedParams (train/offloaded_layers.hpp).
#include <memory>
#include <string>
#include <vector>

#include "core/backend.hpp"
#include "core/cpu/rapl_energy.hpp"
#include "fsdp/layer_slots.hpp"
#include "fsdp/sharding.hpp"
#include "model/model.hpp"
#include "model/param_source.hpp"
#include "optim/optimizer.hpp"
#include "runtime/executor.hpp"
#include "train/offloaded_layers.hpp"
#include "train/sharded_layers.hpp"
#include "train/training_target.hpp"

namespace asteria {

class HostTraining final : public TrainingTarget {
 public:
  // prefetch: distributed.prefetch (sharded: layers gathered ahead); timeout_s: how long a
  // buffer may be waited for before the run is ended, naming it. init_only: the device trains
  // (runtime.backend cuda) and this only initializes the host image (sharded: with one layer
  // buffer instead of the pools a step needs).
  // offloaded: the parameters' store when they live on the disk tier (the model's storage is
  // then BoundParams), else null.
  HostTraining(Model<float>& model, Optimizer& optimizer, Sharding& sharding, int prefetch, double timeout_s,
               bool init_only = false, OffloadedParams* offloaded = nullptr);

  // Sharded: every rank computes each whole initial layer (a pure function of the seed) and keeps
  // its part. Whole: the model initializes itself.
  void init(uint64_t seed);
  // The first parameters from a pretrained model instead (model.init_from): each rank asks the
  // source for the rows it keeps (its shards, or every layer whole), nothing more.
  void init_from(const ParamSource& source);

  // Sharded: the comm lane's handlers (gather, release, reduce_scatter); `micro_batches`: the
  // reduce_scatter of the last one also reduces the shard over the replicas (hybrid).
  void bind_sharded_ops(Executor& executor, int micro_batches) override;
  // Parameters on the disk tier: the handlers of their reads and writes (param_offload_plan_ops.hpp).
  void bind_offload_ops(Executor& executor);
  // Layer l's parameters wherever they live (the model's, or read from the disk tier).
  std::vector<float> params(int l);

  std::string name() const override { return "cpu"; }
  // threads x the CPU's MHz x its fp32 FMA FLOP per cycle (train/estimates/flops.hpp).
  PeakFlops peak_flops(int threads) const override;
  Backend& backend() override { return *backend_; }
  Optimizer& stepping_optimizer() override { return optimizer_; }

  void set_batch(const int32_t* inputs, const int32_t* targets) override { model_.set_batch(inputs, targets); }
  double forward(int l) override { return model_.forward(l); }
  void recompute(int l) override { model_.recompute(l); }
  void backward(int l, double grad_scale) override;
  double last_ce_loss() const override { return model_.last_ce_loss(); }
  double last_z_loss() const override { return model_.last_z_loss(); }
  float* grads(int l) override { return model_.grads(l); }
  double grad_sum_of_squares(int l) override;
  void optim_step(int l, BlockRange blocks, float clip_scale, double lr, int64_t step) override;
  double eval_loss(const int32_t* inputs, const int32_t* targets) override;
  void record_metrics(StepMetrics& metrics) override;
  std::optional<double> energy_j() const override { return energy_.joules(); }
  std::string energy_source() const override {
    return energy_.available() ? "RAPL: the CPU packages' energy counters (every process on them)" : energy_.why_not();
  }

 private:
  Model<float>& model_;
  Optimizer& optimizer_;
  Sharding& sharding_;
  std::unique_ptr<Backend> backend_ = make_cpu_backend();
  // Sharded: the whole-layer buffers in flight (gathered parameters, gradients being reduced;
  // init_only: one parameter buffer), and what the step does with them (null: not sharded or
  // init_only).
  std::unique_ptr<LayerSlots> param_slots_, grad_slots_;
  std::unique_ptr<ShardedLayers<CpuOps, Sharding>> layers_;
  // Parameters on the disk tier (null: in memory), and the executor whose times the metrics read.
  std::unique_ptr<OffloadedLayers> offloaded_;
  const Executor* executor_ = nullptr;
  RaplEnergy energy_;
};

}  // namespace asteria
