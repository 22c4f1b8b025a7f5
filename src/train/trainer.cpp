#include "train/trainer.hpp"

#include <sys/resource.h>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <utility>

#include "comm/communicator.hpp"
#include "comm/nccl_communicator.hpp"
#include "comm/topology.hpp"
#include "core/backend.hpp"
#include "core/cpu/blas_kernels.hpp"
#include "core/error.hpp"
#include "core/step_metrics.hpp"
#include "core/timer.hpp"
#include "data/loader.hpp"
#include "data/token_file.hpp"
#include "fsdp/sharding.hpp"
#include "fsdp/sharding_plan_ops.hpp"
#include "hf/hf_weights.hpp"
#include "model/model.hpp"
#include "optim/optimizer_factory.hpp"
#include "runtime/coherence.hpp"
#include "runtime/executor.hpp"
#include "runtime/shadow.hpp"
#include "runtime/tier_manager.hpp"
#include "runtime/worker_pool.hpp"
#include "train/checkpoint/checkpoint_store.hpp"
#include "train/checkpoint/checkpointer.hpp"
#include "train/device_training.hpp"
#include "train/estimates/flops.hpp"
#include "train/estimates/memory_estimate.hpp"
#include "train/host_training.hpp"
#include "train/lr_schedule.hpp"
#include "train/metrics.hpp"
#include "train/estimates/placement.hpp"
#include "train/rank_device.hpp"
#include "train/replica_check.hpp"
#include "train/run_dir.hpp"
#include "train/run_settings.hpp"
#include "train/step_plan.hpp"
#include "train/stop_signals.hpp"
#include "train/tier_config.hpp"

namespace fs = std::filesystem;

namespace asteria {

namespace {

// The process's peak resident memory so far (getrusage; Linux reports KiB).
double peak_rss_bytes() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) * 1024.0;
}

// Rates of a run that its metrics are measured against.
struct RunRates {
  double peak_flops = 0;          // the mfu's reference
  double flops_per_token = 0;
  int64_t tokens_per_step = 0;
};

}  // namespace

struct Trainer::Impl {
  Config cfg;
  std::unique_ptr<Communicator> own_comm;   // local, when the caller gave none
  Communicator* comm = nullptr;
  int rank = 0, world = 1;
  Topology topo;
  bool writer() const { return rank == 0; }   // the rank that writes run.dir
  std::unique_ptr<Sharding> sharding;
  std::unique_ptr<ShardingPlanOps> sharding_ops;
  TokenFile train_file, eval_file;
  std::unique_ptr<TrainLoader> loader;
  std::unique_ptr<EvalBatches> eval;
  std::unique_ptr<Model<float>> model;
  // Declared in dependency order: the shadow pipeline uses the pool and the optimizer, the
  // executor the pool; members are destroyed in reverse.
  std::unique_ptr<WorkerPool> pool;
  std::unique_ptr<Optimizer> optimizer;
  // What the step runs on: the host model (`host`), or on runtime.backend cuda the device twin
  // (`device`), for which `model` and `optimizer` are the host image it starts from and
  // checkpoints are written from (device_training.hpp).
  std::unique_ptr<HostTraining> host;
  std::unique_ptr<DeviceTraining> device;
  TrainingTarget* target = nullptr;
  std::unique_ptr<Backend> cpu_backend;   // the tiers' memory on the CPU backend (else device's)
  std::unique_ptr<TierManager> tiers;     // owns the optimizer state's memory
  std::unique_ptr<Coherence> coherence;   // asteria mode with replicas of the optimizer state
  std::unique_ptr<ShadowPipeline> shadow;
  std::unique_ptr<Executor> executor;
  std::unique_ptr<Communicator> device_replicas;   // NCCL, with device and several ranks
  std::unique_ptr<Checkpointer> checkpointer;   // null with checkpoint.enabled false
  std::string resume_dir;                       // the checkpoint restored, or ""
  std::unique_ptr<hf::HfWeights> pretrained;    // model.init_from at a fresh start: checked before allocating
  Placement placement;                          // what runtime.placement chose (cfg has it applied)
  MemoryWatch memory_watch;                     // injected, or empty: the machine's
  std::unique_ptr<PlacementWatch> placement_watch;   // placement and memory_limit auto: re-placed under pressure
  int replans = 0;                              // re-placements made
  double replan_s = 0;                          // this step's re-placement, if any
  ResumePoint resumed;
  ModelStepOps model_ops{cfg.model.tied_embeddings, model_recomputed_layers(cfg.model, cfg.train.recompute())};
  OptimizerStepOps optim_ops;
  PlanBuilder builder;
  Plan plan;
  std::vector<int32_t> inputs, targets;
  std::vector<double> grad_sq;        // per layer, filled by GradNorm ops
  std::vector<std::vector<float>> final_params;

  // State of the step being executed (read by the op handlers).
  int64_t step = 0;
  double lr = 0;
  float clip_scale = 1;
  double grad_norm = 0;
  double loss_sum = 0;
  double replica_check_s = 0;   // this step's check of the replicas (distributed.check_every), if any

  // Construction checks everything that can be wrong before anything is allocated or written.
  Impl(const Config& c, Communicator* world_comm, MemoryWatch memory) : cfg(c), memory_watch(std::move(memory)) {
    join_world(world_comm);
    adopt_resumed_config(cfg, writer());
    place();
    resume_dir = check_run_dir(cfg, writer(), world);
    if (resume_dir.empty() && !cfg.model.init_from.empty())
      pretrained = std::make_unique<hf::HfWeights>(cfg.model.init_from, cfg.model);
    // Before anything model-sized is allocated: refuse a run the machine cannot hold (on the GPU
    // a rank's host side: its image, whole or its shards).
    const int ranks_here = topo.uniform ? topo.ranks_per_node : 1;
    check_memory(cfg, world == 1 || cfg.runtime.backend == BackendKind::Cuda ? process_memory(planned_launch(cfg, world, ranks_here))
                                                                              : rank_memory(cfg, world, ranks_here),
                 topo.ranks_per_node);
    set_compute_threads(cfg.runtime.threads);
    open_data();
    build_model_and_optimizer();
    build_runtime();
    build_plan();
    if (!resume_dir.empty()) resumed = checkpointer->restore(resume_dir);
    // After the restore: the device starts from the image as restored.
    if (device) device->upload();
    // Every rank has checked everything before rank 0 writes anything into run.dir.
    comm->barrier("the ranks' startup checks");
  }

  // The ranks, their hosts, and (runtime.backend cuda) each rank's GPU.
  void join_world(Communicator* world_comm) {
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
    // Before any file is opened: a GPU run where there is none says so first. With several
    // ranks each sees only its own GPU, from before the process's first CUDA call.
    if (cfg.runtime.backend == BackendKind::Cuda) select_rank_device(topo, rank, world);
  }

  // runtime.placement auto: the run fitted to the memory it may use (train/placement.hpp), the
  // same choice on every rank (planned against the smallest of their machines' limits); with
  // runtime.memory_limit auto, watched for memory taken or given back while the run goes on.
  void place() {
    const int ranks_here = topo.uniform ? topo.ranks_per_node : 1;
    const bool watched = cfg.runtime.placement == PlacementMode::Auto && cfg.runtime.memory_limit_auto();
    if (watched && !memory_watch) memory_watch = machine_memory_watch(topo.ranks_per_node);
    MemoryReading mine = watched ? memory_watch()
                                 : MemoryReading{memory_limit_bytes(cfg, topo.ranks_per_node), memory_limit_source(cfg, topo.ranks_per_node)};
    const uint64_t reading = mine.limit;
    // A machine's reading counts what the process holds already (its code, libraries, heap: some
    // 200 MiB, none of it in the estimates); the run's own memory has to fit beside it, or a tight
    // cgroup kills the process at its peak.
    if (watched && mine.held > 0 && mine.held < mine.limit && mine.limit != UINT64_MAX) {
      mine.limit -= mine.held;
      mine.source += ", beside the " + human_bytes(static_cast<double>(mine.held)) + " this process holds before allocating";
    }
    uint64_t limit = mine.limit;
    if (world > 1) {
      std::vector<double> limits(static_cast<size_t>(world), 0.0);
      limits[static_cast<size_t>(rank)] = static_cast<double>(mine.limit);
      Request r = comm->all_reduce(limits.data(), limits.size(), "the ranks' memory limits");
      comm->wait(r);
      const double least = *std::min_element(limits.begin(), limits.end());
      limit = least >= 1.8e19 ? UINT64_MAX : static_cast<uint64_t>(least);
      mine.source += ", the smallest over the ranks' machines";
    }
    const TiersConfig given_tiers = cfg.runtime.tiers;
    placement = choose_placement(cfg, placement_inputs(cfg, world, ranks_here, limit, mine.source));
    cfg = placement.cfg;
    model_ops = ModelStepOps(cfg.model.tied_embeddings, model_recomputed_layers(cfg.model, cfg.train.recompute()));
    if (writer()) std::fprintf(stderr, "asteria-train: %s\n", placement.describe().c_str());
    if (watched)
      placement_watch = std::make_unique<PlacementWatch>(placement, given_tiers, memory_watch, world, ranks_here, reading);
  }

  // Between steps: the tiers placed again when the memory the run may use has fallen below what
  // it needs, or come back (train/placement_watch.hpp). The state's bits never change. A disk
  // without room for the move leaves the placement as it is, said once per attempt.
  void adapt_placement() {
    if (!placement_watch) return;
    std::optional<Placement> next = placement_watch->check(placement);
    if (!next) return;
    Timer t;
    // Only the jobs parked (ShadowPipeline::set_resident_jobs below): no state moves.
    const std::string why_not =
        same_tiers(cfg.runtime.tiers, next->cfg.runtime.tiers)
            ? std::string()
            : tiers->relayout(configured_tier_layout(next->cfg, sharding->owned_tables()),
                              disk_tier_file(cfg, std::to_string(replans + 1)), disk_tier_file(cfg, "spill"));
    const std::string who = world > 1 ? "rank " + std::to_string(rank) + ": " : "";
    if (!why_not.empty()) {
      std::fprintf(stderr, "asteria-train: %sbefore step %lld: the memory limit is now %s (%s), but the optimizer state "
                   "could not be moved: %s; the placement stays\n", who.c_str(), static_cast<long long>(step),
                   human_bytes(static_cast<double>(next->limit)).c_str(), next->limit_source.c_str(), why_not.c_str());
      return;
    }
    placement = std::move(*next);
    cfg.runtime.tiers = placement.cfg.runtime.tiers;
    // The refreshes in flight parked as well (buffers beyond the budget freed now).
    if (shadow && placement.cfg.runtime.shadow.resident_jobs != cfg.runtime.shadow.resident_jobs) {
      cfg.runtime.shadow.resident_jobs = placement.cfg.runtime.shadow.resident_jobs;
      shadow->set_resident_jobs(cfg.runtime.shadow.resident_jobs, disk_tier_file(cfg, "shadow-jobs"));
    }
    ++replans;
    replan_s = t.seconds();
    std::fprintf(stderr, "asteria-train: %sbefore step %lld: re-placed in %.1f s (re-plan %d), %s%s\n", who.c_str(),
                 static_cast<long long>(step), replan_s, replans, placement.describe().c_str(),
                 placement.fits ? "" : "\n  (it does not fit even so: the run goes on and may be stopped by the kernel)");
  }

  void open_data() {
    const TokenDtype dtype = data_dtype(cfg);
    train_file = TokenFile(cfg.data.train, dtype, cfg.model.vocab_size);
    loader = std::make_unique<TrainLoader>(train_file, cfg.model.seq_len, cfg.seed);
    if (!cfg.data.eval.empty()) {
      eval_file = TokenFile(cfg.data.eval, dtype, cfg.model.vocab_size);
      eval = std::make_unique<EvalBatches>(eval_file, cfg.model.seq_len, cfg.train.micro_batch, cfg.data.eval_batches);
    }
    inputs.resize(static_cast<size_t>(cfg.train.micro_batch) * cfg.model.seq_len);
    targets.resize(inputs.size());
  }

  // This rank's part of every layer (all of it unless sharded), the optimizer that steps it,
  // the target the step runs on, and the tiered memory the optimizer's state lives in.
  void build_model_and_optimizer() {
    const std::vector<ParamTable> tables = model_param_tables(cfg.model);
    sharding = std::make_unique<Sharding>(cfg.distributed.fsdp, topo, tables, shard_unit_rows(cfg.optim));
    // Sharded (ZeRO-3): the model runs on whole-layer buffers bound in flight. On the GPU the
    // host keeps the parameters only, the image the device starts from.
    const auto storage = sharding->sharded()               ? Model<float>::Storage::Bound
                         : cfg.runtime.backend == BackendKind::Cuda   ? Model<float>::Storage::Image
                                                           : Model<float>::Storage::Owned;
    model = std::make_unique<Model<float>>(cfg.model, cfg.train.micro_batch, storage, cfg.train.recompute(),
                                           cfg.runtime.precision);
    const std::vector<ParamTable>& owned = sharding->owned_tables();
    // The optimizer's state lives where the tiered state manager puts it (by default: all of it
    // in the device tier: GPU memory on CUDA, host memory on the CPU backend), bound below to the
    // tensors of the optimizer that steps there. Placed first: budgets it cannot meet are refused
    // before any device memory is taken.
    TierLayout layout = configured_tier_layout(cfg, owned);
    optimizer = make_optimizer(cfg.optim, owned, cfg.runtime.staggered(), /*own_memory=*/false);
    // The whole model's block indices and (staggered) refresh schedule for a rank's blocks.
    if (auto* so = dynamic_cast<SecondOrderOptimizer*>(optimizer.get()); so && sharding->sharded()) so->follow_whole_model(tables);
    const bool on_device = cfg.runtime.backend == BackendKind::Cuda;
    host = std::make_unique<HostTraining>(*model, *optimizer, *sharding, cfg.distributed.prefetch, cfg.distributed.timeout_s,
                                          /*init_only=*/on_device);
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
    } else {
      cpu_backend = make_cpu_backend();
    }
    tiers = std::make_unique<TierManager>(std::move(layout), device ? device->device_optimizer() : *optimizer,
                                          disk_tier_file(cfg), device ? device->backend() : *cpu_backend);
    // Replicas of whole layers on the GPU: the gradients' all-reduce in device memory, over NCCL
    // among the same ranks (sharded, the device's shards have their own).
    if (Communicator* replicas = sharding->replicas(); device && replicas && !sharding->sharded()) {
      device_replicas = make_nccl_communicator(*replicas, /*device=*/0);   // replicas' timeout
      sharding->use_device_replicas(*device_replicas);
    }
    grad_sq.assign(model->num_layers(), 0.0);
  }

  // asteria mode with a second-order optimizer: the shadow pipeline (and with replicas the
  // coherence of their state); the executor.
  void build_runtime() {
    SecondOrderOptimizer* second_order = device ? device->second_order() : dynamic_cast<SecondOrderOptimizer*>(optimizer.get());
    if (cfg.runtime.mode == RuntimeMode::Asteria && second_order) {
      const ShadowLane lane = shadow_lane(cfg);
      // The workers compute on the host (workers), or hand the jobs to the GPU's solvers (device).
      if (lane != ShadowLane::Compute) pool = std::make_unique<WorkerPool>(cfg.runtime.shadow.threads);
      // Replicas of this rank's blocks (fsdp none, or hybrid across nodes): one owner computes each.
      if (Communicator* replicas = sharding->replicas()) {
        std::vector<std::vector<MatrixBlock>> blocks;
        for (int l = 0; l < second_order->num_layers(); ++l) blocks.push_back(second_order->blocks(l));
        const CoherenceConfig& cc = cfg.runtime.coherence;
        coherence = std::make_unique<Coherence>(CoherenceRule{cc.staleness, cc.tolerance}, cc.hierarchical, *replicas,
                                                topo.node, blocks);
      }
      shadow = std::make_unique<ShadowPipeline>(*second_order, pool.get(), shadow_delay(cfg),
                                                cfg.runtime.shadow.worker_delay_ms / 1000.0, coherence.get(),
                                                /*in_place=*/lane == ShadowLane::Device, sharding->reduces());
      if (cfg.runtime.shadow.resident_jobs > 0)
        shadow->set_resident_jobs(cfg.runtime.shadow.resident_jobs, disk_tier_file(cfg, "shadow-jobs"));
    }
    executor = std::make_unique<Executor>(pool.get());
  }

  // The step's contributors (step_plan.hpp: their order) and the handlers of their ops.
  void build_plan() {
    if (cfg.checkpoint.enabled || !resume_dir.empty()) {
      std::vector<DataFingerprint> data = {token_file_fingerprint("train", cfg.data.train)};
      std::vector<Stateful*> state = {loader.get(), optimizer.get()};   // what saves named fields
      for (Stateful* s : shadow_state_parts(shadow.get())) state.push_back(s);
      checkpointer = std::make_unique<Checkpointer>(cfg, RunParts{*model, *optimizer, *tiers, state, sharding.get()},
                                                    std::move(data));
      checkpointer->bind(*executor);
    }
    sharding_ops = std::make_unique<ShardingPlanOps>(sharding->sharded(), sharding->reduces(), cfg.distributed.prefetch,
                                                     cfg.model.tied_embeddings);
    if (shadow) shadow->bind(*executor);
    tiers->bind(*executor);
    add_step_contributors(builder, {checkpointer ? &checkpointer->plan_ops() : nullptr, &model_ops, sharding_ops.get(),
                                    shadow ? &shadow->plan_ops() : nullptr, &tiers->planner(), &optim_ops});
    if (sharding->sharded()) target->bind_sharded_ops(*executor, cfg.train.grad_accum);
    bind_step_handlers();
  }

  // The handlers of the model's and the optimizer's ops, and of the replicas' all-reduce.
  void bind_step_handlers() {
    const int last = model->num_layers() - 1;
    const double grad_scale = 1.0 / cfg.train.grad_accum;
    executor->bind(OpKind::LoadBatch, [this](const Op&) {
      loader->next_batch(cfg.train.micro_batch, inputs.data(), targets.data(), rank, world);
      target->set_batch(inputs.data(), targets.data());
    });
    executor->bind(OpKind::Forward, [this, last](const Op& op) {
      const double loss = target->forward(op.layer);
      if (op.layer == last) loss_sum += loss;
    });
    executor->bind(OpKind::Recompute, [this](const Op& op) { target->recompute(op.layer); });
    executor->bind(OpKind::Backward, [this, grad_scale](const Op& op) { target->backward(op.layer, grad_scale); });
    // Replicated: the mean over the ranks of the whole gradient (each already the mean of its micro-batches).
    executor->bind(OpKind::AllReduce, [this](const Op& op) {
      sharding->reduce_over_replicas(op.layer, target->grads(op.layer),
                                     "all_reduce of the gradient of " + model->layer_name(op.layer));
    });
    executor->bind(OpKind::GradNorm, [this](const Op& op) { grad_sq[op.layer] = target->grad_sum_of_squares(op.layer); });
    executor->bind(OpKind::ClipGrads, [this](const Op&) { clip_grads(); });
    executor->bind(OpKind::OptimStep, [this](const Op& op) { target->optim_step(op.layer, op.blocks, clip_scale, lr, step); });
  }

  void clip_grads() {
    double s = 0;
    for (double x : grad_sq) s += x;
    // Sharded: each rank summed its own shards. Every comm op of the plan is done by now (the
    // reductions are this op's dependencies, the gathers preceded the forward), so the compute
    // lane may call the communicator.
    sharding->sum_over_group(&s, 1, "all_reduce of the gradient norm");
    grad_norm = std::sqrt(s);
    // Here every rank holds the parameters the step computed with.
    if (cfg.distributed.check_every > 0 && step % cfg.distributed.check_every == 0) {
      Timer t;
      check_replicas_identical("step " + std::to_string(step));
      replica_check_s = t.seconds();
    }
    const double clip = cfg.optim.grad_clip;
    clip_scale = (clip > 0 && grad_norm > clip) ? static_cast<float>(clip / grad_norm) : 1.0f;
  }

  // The replicas must hold the same bits (train/replica_check.hpp): this rank's tensors (its
  // shards when sharded) against those of the first rank holding the same part.
  void check_replicas_identical(const std::string& when) {
    if (world == 1) return;
    target->download_params();   // the device's parameters into the image hashed here
    const std::vector<TensorBits> tensors = owned_tensors(sharding->owned_tables(), [this](int l) {
      return sharding->sharded() ? sharding->shard_params(l) : model->params(l);
    });
    asteria::check_replicas_identical(*comm, sharding->group_rank(), tensors, when);
  }

  // run.dir ready, with the resolved config and run_info.json (what the run measures against).
  RunRates start_run_dir(const fs::path& dir) {
    const int threads = compute_threads(cfg);
    RunRates r;
    r.peak_flops = cfg.run.peak_flops > 0 ? cfg.run.peak_flops
                   : device               ? device->dense_bf16_peak_flops()
                                          : cpu_peak_flops(threads);
    r.flops_per_token = training_flops_per_token(cfg.model);
    r.tokens_per_step = static_cast<int64_t>(cfg.train.micro_batch) * cfg.train.grad_accum * cfg.model.seq_len * world;
    if (!writer()) return r;
    fs::create_directories(dir);
    prepare_run_dir(dir, cfg, resume_dir, resumed.step);
    write_text_durably(dir / "config.yaml", config_to_yaml(cfg));
    nlohmann::json info = {{"params", model->num_params()},
                           {"flops_per_token", r.flops_per_token},
                           {"flop_formula", training_flops_formula()},
                           {"peak_flops", r.peak_flops},
                           {"peak_formula", cfg.run.peak_flops > 0 ? "run.peak_flops"
                                            : device ? (r.peak_flops > 0 ? "the GPU's dense bf16 tensor-core peak"
                                                                         : "unknown GPU: set run.peak_flops")
                                                     : "threads x cpu MHz x 32 fp32 FLOP/cycle (AVX2 FMA)"},
                           {"backend", device ? device->device_name() : "cpu"},
                           {"precision", to_string(cfg.runtime.precision)},
                           {"threads", threads},
                           {"blas", blas_report()},
                           {"tokens_per_step", r.tokens_per_step},
                           {"ranks", world}};
    // This rank's share of the optimizer's GEMMs (a sharded rank's tensors; with replicas, all).
    if (const double flops = describe(cfg.optim.name).step_flops(cfg.optim, sharding->owned_tables()); flops > 0)
      info["optimizer_step_matmul_flops"] = flops;
    if (shadow) info["shadow_lane"] = to_string(shadow_lane(cfg));
    info["placement"] = placement_json(placement);
    write_text_durably(dir / "run_info.json", info.dump(2) + "\n");
    return r;
  }

  // The step's figures from every subsystem, and what the loop needs from every rank (the loss,
  // a stop asked on any rank, a sharded checkpoint's files written), combined in one collective.
  void record_and_reduce(StepMetrics& m, const StopSignals& signals) {
    m.sum("loss_sum", loss_sum, /*written=*/false);
    m.sum("stop", static_cast<double>(signals.pending()), false);
    const bool ckpt_pending = checkpointer && checkpointer->shard_write_pending();
    m.sum("checkpoint_pending", ckpt_pending ? 1 : 0, false);
    m.sum("checkpoint_writing", ckpt_pending && !checkpointer->shard_written() ? 1 : 0, false);
    m.per_rank("peak_rss_bytes", peak_rss_bytes());   // its part of the state differs when sharded
    sharding->record_metrics(m, *executor);
    if (coherence) coherence->record_metrics(m, *executor, step);
    if (shadow) shadow->record_metrics(m, *executor);
    target->record_metrics(m);
    tiers->record_metrics(m, *executor);
    if (placement_watch) {
      m.sum("placement_replans", replans);
      if (replan_s > 0) m.local("placement_replan_s", std::exchange(replan_s, 0.0));
    }
    m.reduce([this](double* data, size_t count) {
      Request r = comm->all_reduce(data, count, "the metrics of step " + std::to_string(step));
      comm->wait(r);
    });
    // A sharded async checkpoint every writing rank has written: all of them publish it now.
    if (m.total("checkpoint_pending") > 0 && m.total("checkpoint_writing") == 0 && ckpt_pending) checkpointer->finish();
  }

  // The compute lane's own figures of the step.
  void record_step(StepMetrics& m, double loss, double step_s, const RunRates& rates, double elapsed_s) {
    const double tps = rates.tokens_per_step / step_s;
    m.local("step", step);
    m.local("loss", loss);
    m.local("lr", lr);
    m.local("grad_norm", grad_norm);
    m.local("tokens", step * rates.tokens_per_step);
    m.local("tokens_per_s", tps);
    m.local("mfu", rates.peak_flops > 0 ? tps * rates.flops_per_token / rates.peak_flops : 0.0);
    m.local("step_time_s", step_s);
    m.local("data_s", executor->seconds(OpKind::LoadBatch));
    m.local("fwd_s", executor->seconds(OpKind::Forward));
    m.local("recompute_s", executor->seconds(OpKind::Recompute));
    m.local("bwd_s", executor->seconds(OpKind::Backward));
    m.local("optim_s", executor->seconds(OpKind::GradNorm) + executor->seconds(OpKind::ClipGrads) +
                           executor->seconds(OpKind::OptimStep));
    m.local("elapsed_s", elapsed_s);
    if (replica_check_s > 0) m.local("replica_check_s", std::exchange(replica_check_s, 0.0));
    if (cfg.model.z_loss > 0) m.local("z_loss", target->last_z_loss());
  }

  // The mean eval loss over the eval batches (between steps).
  double evaluate() {
    double sum = 0;
    for (int b = 0; b < eval->count(); ++b) {
      eval->get(b, inputs.data(), targets.data());
      sum += target->eval_loss(inputs.data(), targets.data());
    }
    sharding->take_bytes();   // eval's gathers are no step's comm
    return sum / eval->count();
  }

  // A checkpoint every checkpoint.every steps, at the last step, and when a signal asks. One rank
  // writes a replicated run's checkpoint; every rank of one shard group a sharded one's.
  void checkpoint_if_due(int64_t last, int sig, double elapsed_s, int64_t tokens_per_step, TrainResult& result) {
    if (!checkpointer || !cfg.checkpoint.enabled) return;
    if (!((cfg.checkpoint.every > 0 && step % cfg.checkpoint.every == 0) || step == last || sig)) return;
    save_checkpoint(step, elapsed_s, tokens_per_step, step < last && !sig, result);
  }

  void save_checkpoint(int64_t s, double elapsed_s, int64_t tokens_per_step, bool more_steps, TrainResult& result) {
    // Replicas: the owners hand their refreshes in flight to the writing replica (every rank).
    if (shadow) shadow->prepare_checkpoint();
    target->download();   // the image the checkpoint is written from
    if (!sharding->writes_checkpoints()) return;
    checkpointer->save(s, s * tokens_per_step, elapsed_s, more_steps);
    result.checkpoint = (fs::path(checkpointer->root()) / checkpoint_dir_name(s)).string();
  }

  TrainResult run() {
    const fs::path dir = cfg.run.dir;
    const RunRates rates = start_run_dir(dir);
    MetricsWriter metrics_file = writer() ? MetricsWriter((dir / "metrics.jsonl").string(), !resume_dir.empty()) : MetricsWriter();
    ProgressLine progress(cfg.train.steps, cfg.run.log_every);
    StepMetrics metrics(rank, world);
    const StopSignals signals;
    TrainResult result;
    result.last_step = resumed.step;
    Timer wall;
    const double elapsed0 = resumed.elapsed_s;   // a resumed run's clock goes on
    double timed_tokens = 0, timed_seconds = 0, energy_j_total = 0;
    const int64_t last = cfg.train.stop_after > 0 ? std::min(cfg.train.stop_after, cfg.train.steps) : cfg.train.steps;
    for (step = resumed.step + 1; step <= last; ++step) {
      if (step > resumed.step + 1) adapt_placement();   // before the step's plan is built
      lr = lr_at(step, cfg.optim.lr, cfg.train);
      builder.build({step, model->num_layers(), cfg.train.grad_accum, &tiers->layout().parts}, plan);
      loss_sum = 0;
      executor->reset_times();
      metrics.begin_step();
      const std::optional<double> energy0 = target->energy_j();
      Timer t;
      executor->run(plan);
      record_and_reduce(metrics, signals);
      const double step_s = t.seconds();
      const double loss = metrics.total("loss_sum") / (cfg.train.grad_accum * world);
      ASTERIA_CHECK(std::isfinite(loss), "training diverged: loss is ", loss, " at step ", step);
      if (step > resumed.step + 1) {
        timed_tokens += static_cast<double>(rates.tokens_per_step);
        timed_seconds += step_s;
      }
      record_step(metrics, loss, step_s, rates, elapsed0 + wall.seconds());
      if (const std::optional<double> energy1 = target->energy_j(); energy0 && energy1) {
        metrics.local("energy_j", *energy1 - *energy0);   // the GPU's, over the step (NVML)
        energy_j_total += *energy1 - *energy0;
        metrics.local("energy_j_total", energy_j_total);
      }
      double eval_loss = -1;
      if (eval && ((cfg.train.eval_every > 0 && step % cfg.train.eval_every == 0) || step == cfg.train.steps)) {
        Timer te;
        eval_loss = result.final_eval_loss = evaluate();
        metrics.local("eval_loss", eval_loss);
        metrics.local("eval_s", te.seconds());
      }
      // The step's line first: a checkpoint of step N always finds lines 1..N written, so a
      // resumed metrics.jsonl (cut back to N) never misses one.
      if (checkpointer) checkpointer->record_metrics(metrics, *executor);
      metrics_file.write(metrics.record());
      if (writer()) progress.update(step, loss, rates.tokens_per_step / step_s, elapsed0 + wall.seconds(), eval_loss);
      const int sig = metrics.total("stop") > 0 ? (signals.pending() ? signals.pending() : SIGTERM) : 0;
      checkpoint_if_due(last, sig, elapsed0 + wall.seconds(), rates.tokens_per_step, result);
      result.final_loss = loss;
      result.last_step = step;
      if (sig) {
        result.signal = sig;
        break;
      }
    }
    finish_run(last, rates.tokens_per_step, result);
    if (writer()) progress.finish();
    check_replicas_identical("the end of training");
    result.tokens_per_s = timed_seconds > 0 ? timed_tokens / timed_seconds : 0;
    gather_final_params();
    return result;
  }

  // After the last step: the last checkpoint published, the image up to date.
  void finish_run(int64_t last, int64_t tokens_per_step, TrainResult& result) {
    // Resumed with nothing left to train (train.stop_after or train.steps at the checkpoint's
    // step): the loaded state is written as this run's checkpoint of that step, at this run's
    // world size and sharding (a checkpoint re-laid out for another launch).
    if (checkpointer && cfg.checkpoint.enabled && !resume_dir.empty() && resumed.step >= last) {
      if (shadow) shadow->prepare_checkpoint();
      if (sharding->writes_checkpoints()) {
        checkpointer->save(resumed.step, resumed.step * tokens_per_step, resumed.elapsed_s, false);
        result.checkpoint = (fs::path(checkpointer->root()) / checkpoint_dir_name(resumed.step)).string();
      }
    }
    if (checkpointer) checkpointer->finish();
    target->download();   // final_params() reads the image
  }

  // Sharded: the whole parameters on every rank, gathered from the shards now (a collective,
  // so not on demand). One process reads them from the model when asked, so that a model that
  // fills the machine is not copied at the end.
  void gather_final_params() {
    final_params.clear();
    if (!sharding->sharded()) return;
    for (int l = 0; l < model->num_layers(); ++l) {
      std::vector<float>& p = final_params.emplace_back(model->table(l).numel);
      sharding->gather(l, p.data(), "gather of " + model->layer_name(l) + " after the last step");
    }
  }
};

Trainer::Trainer(const Config& cfg, Communicator* world, MemoryWatch memory)
    : impl_(std::make_unique<Impl>(cfg, world, std::move(memory))) {}
Trainer::~Trainer() = default;
TrainResult Trainer::run() { return impl_->run(); }
std::vector<float> Trainer::final_params(int layer) const {
  if (!impl_->final_params.empty()) return impl_->final_params.at(layer);
  const float* p = impl_->model->params(layer);
  return std::vector<float>(p, p + impl_->model->table(layer).numel);
}
int Trainer::num_layers() const { return impl_->model->num_layers(); }

}  // namespace asteria
