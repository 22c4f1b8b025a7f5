#pragma once
// A training run assembled: every part a step uses, built in dependency order by the constructor,
// which checks everything that can be wrong (supported features, data files, sequence length vs
// data, the memory the run needs, the checkpoint to resume from and its config) before anything
// is allocated or written to run.dir, and restores the checkpoint. The step loop
// (train/step_loop.hpp) runs the steps on it; Trainer (trainer.hpp) is the two together.
//
// The parts, bottom up: the world (ranks, hosts, each rank's GPU), the placement (what fits the
// memory), the data, the model and the optimizer on this rank's part of every layer (sharding),
// the target the step computes on (host or device), the tiered memory of the optimizer state, the
// shadow pipeline and coherence (asteria mode, second-order optimizers), the executor and the
// step's plan contributors, the checkpointer.
#include <memory>
#include <string>
#include <vector>

#include "comm/communicator.hpp"
#include "comm/topology.hpp"
#include "config/config.hpp"
#include "data/loader.hpp"
#include "data/token_file.hpp"
#include "fsdp/param_offload.hpp"
#include "fsdp/param_offload_plan_ops.hpp"
#include "fsdp/sharding.hpp"
#include "fsdp/sharding_plan_ops.hpp"
#include "hf/hf_weights.hpp"
#include "model/model.hpp"
#include "optim/optimizer.hpp"
#include "runtime/coherence.hpp"
#include "runtime/executor.hpp"
#include "runtime/plan_builder.hpp"
#include "runtime/shadow.hpp"
#include "runtime/tier_manager.hpp"
#include "runtime/worker_pool.hpp"
#include "train/checkpoint/checkpointer.hpp"
#include "train/host_training.hpp"
#include "train/run_placement.hpp"
#include "train/step_plan.hpp"
#include "train/training_target.hpp"

namespace asteria {

struct TrainingRun {
  // world: the ranks (null: this process alone); memory: as RunPlacement's.
  TrainingRun(const Config& cfg, Communicator* world, MemoryWatch memory);
  ~TrainingRun();
  TrainingRun(const TrainingRun&) = delete;
  TrainingRun& operator=(const TrainingRun&) = delete;

  bool writer() const { return rank == 0; }   // the rank that writes run.dir

  Config cfg;                                 // as given, the checkpoint's fixed keys and the placement applied
  std::unique_ptr<Communicator> own_comm;     // local, when the caller gave none
  Communicator* comm = nullptr;
  int rank = 0, world = 1;
  Topology topo;
  std::unique_ptr<RunPlacement> placement;
  std::string resume_dir;                     // the checkpoint restored, or ""
  ResumePoint resumed;
  std::unique_ptr<Sharding> sharding;
  std::unique_ptr<ShardingPlanOps> sharding_ops;
  // runtime.tiers.params.home disk: the parameters' store and its ops (null: in memory).
  std::unique_ptr<OffloadedParams> offloaded_params;
  std::unique_ptr<ParamOffloadPlanOps> params_ops;
  TokenFile train_file, eval_file;
  std::unique_ptr<TrainLoader> loader;
  std::unique_ptr<EvalBatches> eval;          // null without data.eval
  std::unique_ptr<Model<float>> model;
  // Declared in dependency order: the shadow pipeline uses the pool and the optimizer, the
  // executor the pool; members are destroyed in reverse.
  std::unique_ptr<WorkerPool> pool;
  std::unique_ptr<Optimizer> optimizer;
  // What the step runs on: the host model (`host`), or on runtime.backend cuda the device twin
  // (`device`), for which `model` and `optimizer` are the host image it starts from and
  // checkpoints are written from (device_training.hpp).
  std::unique_ptr<HostTraining> host;
  std::unique_ptr<TrainingTarget> device;
  TrainingTarget* target = nullptr;
  std::unique_ptr<TierManager> tiers;         // owns the optimizer state's memory
  std::unique_ptr<Coherence> coherence;       // asteria mode with replicas of the optimizer state
  std::unique_ptr<ShadowPipeline> shadow;     // asteria mode with a second-order optimizer
  std::unique_ptr<Executor> executor;
  std::unique_ptr<Communicator> device_replicas;   // NCCL, with device and several ranks
  std::unique_ptr<Checkpointer> checkpointer;      // null with checkpoint.enabled false and no resume
  std::unique_ptr<ModelStepOps> model_ops;
  OptimizerStepOps optim_ops;
  PlanBuilder builder;                        // the step's contributors added

 private:
  void join_world(Communicator* world_comm);
  void check_machine_memory();
  void open_data();
  void build_model_and_optimizer(std::unique_ptr<hf::HfWeights> pretrained);
  void build_runtime();
  void build_plan();
};

}  // namespace asteria
