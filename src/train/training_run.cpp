#include "train/training_run.hpp"

#include <cstdio>
#include <utility>

#include "comm/nccl_communicator.hpp"
#include "core/backend.hpp"
#include "core/cpu/blas_kernels.hpp"
#include "core/cpu/gemm_routing.hpp"
#include "core/error.hpp"
#include "core/timer.hpp"
#include "optim/optimizer_factory.hpp"
#include "optim/second_order.hpp"
#include "train/checkpoint/checkpoint_store.hpp"
#include "train/device_training.hpp"
#include "train/estimates/memory_estimate.hpp"
#include "train/rank_device.hpp"
#include "train/run_dir.hpp"
#include "train/run_settings.hpp"
#include "train/tier_config.hpp"

namespace asteria {

TrainingRun::TrainingRun(const Config& c, Communicator* world_comm, MemoryWatch memory) : cfg(c) {
  join_world(world_comm);
  adopt_resumed_config(cfg, writer());
  placement = std::make_unique<RunPlacement>(cfg, *comm, topo, std::move(memory));
  resume_dir = check_run_dir(cfg, writer(), world);
  // At a fresh start: the pretrained files checked before anything is allocated.
  std::unique_ptr<hf::HfWeights> pretrained;
  if (resume_dir.empty() && !cfg.model.init_from.empty())
    pretrained = std::make_unique<hf::HfWeights>(cfg.model.init_from, cfg.model);
  check_machine_memory();
  set_compute_threads(cfg.runtime.threads);
  set_gemm_choice(cfg.runtime.gemm);
  open_data();
  build_model_and_optimizer(std::move(pretrained));
  build_runtime();
  build_plan();
  if (!resume_dir.empty()) resumed = checkpointer->restore(resume_dir);
  if (offloaded_params) offloaded_params->take_traffic();   // the first step's figures are its own
  // After the restore: the device starts from the image as restored.
  target->upload();
  // Every rank has checked everything before rank 0 writes anything into run.dir.
  comm->barrier("the ranks' startup checks");
}

TrainingRun::~TrainingRun() = default;

// The ranks, their hosts, and (runtime.backend cuda) each rank's GPU.
void TrainingRun::join_world(Communicator* world_comm) {
  if (!world_comm) {
    own_comm = make_local_communicator();
    world_comm = own_comm.get();
  }
  comm = world_comm;
  rank = comm->rank();
  world = comm->size();
  ASTERIA_CHECK(cfg.distributed.world_size == 0 || cfg.distributed.world_size == world, cfg.source, ": distributed.world_size is ",
                cfg.distributed.world_size, " but this launch has ", world, " rank(s) (the key plans --dry-run / --print-plan)");
  topo = make_topology(*comm, cfg.distributed.ranks_per_node);
  topo.set_timeout(cfg.distributed.timeout_s);
  if (!topo.note.empty() && writer()) std::fprintf(stderr, "asteria-train: note: %s\n", topo.note.c_str());
  check_supported(cfg);
  check_params_home(cfg, world);
  // Before any file is opened: a GPU run where there is none says so first. With several
  // ranks each sees only its own GPU, from before the process's first CUDA call.
  if (cfg.runtime.backend == BackendKind::Cuda) select_rank_device(topo, rank, world);
}

// Before anything model-sized is allocated: refuse a run the machine cannot hold (on the GPU a
// rank's host side: its image, whole or its shards).
void TrainingRun::check_machine_memory() {
  const int ranks_here = topo.uniform ? topo.ranks_per_node : 1;
  const bool whole_process = world == 1 || cfg.runtime.backend == BackendKind::Cuda;
  check_memory(cfg, whole_process ? process_memory(planned_launch(cfg, world, ranks_here)) : rank_memory(cfg, world, ranks_here),
               topo.ranks_per_node);
}

void TrainingRun::open_data() {
  const TokenDtype dtype = data_dtype(cfg);
  train_file = TokenFile(cfg.data.train, dtype, cfg.model.vocab_size);
  loader = std::make_unique<TrainLoader>(train_file, cfg.model.seq_len, cfg.seed);
  if (!cfg.data.eval.empty()) {
    eval_file = TokenFile(cfg.data.eval, dtype, cfg.model.vocab_size);
    eval = std::make_unique<EvalBatches>(eval_file, cfg.model.seq_len, cfg.train.micro_batch, cfg.data.eval_batches);
  }
}

// This rank's part of every layer (all of it unless sharded), the optimizer that steps it, the
// target the step runs on, and the tiered memory the optimizer's state lives in.
void TrainingRun::build_model_and_optimizer(std::unique_ptr<hf::HfWeights> pretrained) {
  const std::vector<ParamTable> tables = model_param_tables(cfg.model);
  sharding = std::make_unique<Sharding>(cfg.distributed.fsdp, topo, tables, shard_unit_rows(cfg.optim));
  const bool on_device = cfg.runtime.backend == BackendKind::Cuda;
  // Sharded (ZeRO-3): the model runs on whole-layer buffers bound in flight. On the GPU the host
  // keeps the parameters only, the image the device starts from.
  // Parameters on the disk tier: the model owns its gradients, and runs on the store's buffers.
  const bool params_disk = cfg.runtime.tiers.params.home == ParamsHome::Disk;
  const auto storage = sharding->sharded() ? Model<float>::Storage::Bound
                       : on_device         ? Model<float>::Storage::Image
                       : params_disk       ? Model<float>::Storage::BoundParams
                                           : Model<float>::Storage::Owned;
  model = std::make_unique<Model<float>>(cfg.model, cfg.train.micro_batch, storage, cfg.train.recompute(), cfg.runtime.precision);
  const std::vector<ParamTable>& owned = sharding->owned_tables();
  // The optimizer's state lives where the tiered state manager puts it (by default: all of it in
  // the device tier: GPU memory on CUDA, host memory on the CPU backend), bound below to the
  // tensors of the optimizer that steps there. Placed first: budgets it cannot meet are refused
  // before any device memory is taken.
  TierLayout layout = configured_tier_layout(cfg, owned);
  optimizer = make_optimizer(cfg.optim, owned, cfg.runtime.staggered(), /*own_memory=*/false);
  // The whole model's block indices and (staggered) refresh schedule for a rank's blocks.
  if (auto* so = dynamic_cast<SecondOrderOptimizer*>(optimizer.get()); so && sharding->sharded()) so->follow_whole_model(tables);
  if (params_disk) {
    std::vector<size_t> floats;
    for (const ParamTable& t : tables) floats.push_back(t.numel);
    offloaded_params = std::make_unique<OffloadedParams>(floats, params_on_disk(cfg), model_layer_names(cfg.model),
                                                         params_buffers(cfg), disk_tier_file(cfg, "params"),
                                                         cfg.distributed.timeout_s);
  }
  host = std::make_unique<HostTraining>(*model, *optimizer, *sharding, cfg.distributed.prefetch, cfg.distributed.timeout_s,
                                        /*init_only=*/on_device, offloaded_params.get());
  if (pretrained) {
    Timer t;
    host->init_from(*pretrained);
    if (writer())
      std::fprintf(stderr, "asteria-train: parameters from %s in %.1f s; optimizer state and counters start fresh\n",
                   pretrained->describe().c_str(), t.seconds());
    pretrained.reset();   // the files unmapped: nothing of them stays
  } else {
    host->init(cfg.seed);
  }
  target = host.get();
  if (on_device) {
    // The device side is allocated now and filled after the restore.
    device = make_device_training(cfg, *model, *optimizer, *sharding);
    target = device.get();
  }
  tiers = std::make_unique<TierManager>(std::move(layout), target->stepping_optimizer(), disk_tier_file(cfg), target->backend());
  // Replicas of whole layers on the GPU: the gradients' all-reduce in device memory, over NCCL
  // among the same ranks (sharded, the device's shards have their own).
  if (Communicator* replicas = sharding->replicas(); device && replicas && !sharding->sharded()) {
    device_replicas = make_nccl_communicator(*replicas, /*device=*/0);   // replicas' timeout
    sharding->use_device_replicas(*device_replicas);
  }
}

// asteria mode with a second-order optimizer: the shadow pipeline (and with replicas the
// coherence of their state); the executor.
void TrainingRun::build_runtime() {
  auto* second_order = dynamic_cast<SecondOrderOptimizer*>(&target->stepping_optimizer());
  if (cfg.runtime.mode == RuntimeMode::Asteria && second_order) {
    const ShadowLane lane = shadow_lane(cfg);
    // The workers compute on the host (workers), or hand the jobs to the GPU's solvers (device).
    if (lane != ShadowLane::Compute) pool = std::make_unique<WorkerPool>(cfg.runtime.shadow.threads);
    // Replicas of this rank's blocks (fsdp none, or hybrid across nodes): one owner computes each.
    if (Communicator* replicas = sharding->replicas()) {
      std::vector<std::vector<MatrixBlock>> blocks;
      for (int l = 0; l < second_order->num_layers(); ++l) blocks.push_back(second_order->blocks(l));
      const CoherenceConfig& cc = cfg.runtime.coherence;
      coherence = std::make_unique<Coherence>(CoherenceRule{cc.staleness, cc.tolerance}, cc.hierarchical, *replicas, topo.node,
                                              blocks);
    }
    const ShadowOptions options{.pool = pool.get(),
                                .delay = shadow_delay(cfg),
                                .worker_delay_s = cfg.runtime.shadow.worker_delay_ms / 1000.0,
                                .coherence = coherence.get(),
                                .in_place = lane == ShadowLane::Device,
                                .gradient_reductions = sharding->reduces(),
                                .resident_jobs = cfg.runtime.shadow.resident_jobs,
                                .jobs_file = disk_tier_file(cfg, "shadow-jobs")};
    shadow = std::make_unique<ShadowPipeline>(*second_order, options);
  }
  executor = std::make_unique<Executor>(pool.get());
}

// The checkpointer and the step's contributors (step_plan.hpp: their order), bound to the executor.
void TrainingRun::build_plan() {
  if (cfg.checkpoint.enabled || !resume_dir.empty()) {
    std::vector<DataFingerprint> data = {token_file_fingerprint("train", cfg.data.train)};
    std::vector<Stateful*> state = {loader.get(), optimizer.get()};   // what saves named fields
    for (Stateful* s : shadow_state_parts(shadow.get())) state.push_back(s);
    checkpointer = std::make_unique<Checkpointer>(
        cfg, RunParts{*model, *optimizer, *tiers, state, sharding.get(), offloaded_params.get()}, std::move(data));
    checkpointer->bind(*executor);
  }
  sharding_ops = std::make_unique<ShardingPlanOps>(sharding->sharded(), sharding->reduces(), cfg.distributed.prefetch,
                                                   cfg.model.tied_embeddings);
  if (offloaded_params) {
    params_ops = std::make_unique<ParamOffloadPlanOps>(params_on_disk(cfg), cfg.runtime.tiers.params.prefetch_distance);
    host->bind_offload_ops(*executor);
  }
  model_ops = std::make_unique<ModelStepOps>(cfg.model.tied_embeddings, model_recomputed_layers(cfg.model, cfg.train.recompute()));
  if (shadow) shadow->bind(*executor);
  tiers->bind(*executor);
  add_step_contributors(builder, {.checkpoint = checkpointer ? &checkpointer->plan_ops() : nullptr,
                                  .model = model_ops.get(),
                                  .sharding = sharding_ops.get(),
                                  .params = params_ops.get(),
                                  .shadow = shadow ? &shadow->plan_ops() : nullptr,
                                  .tiers = &tiers->planner(),
                                  .optimizer = &optim_ops});
  if (sharding->sharded()) target->bind_sharded_ops(*executor, cfg.train.grad_accum);
}

}  // namespace asteria
