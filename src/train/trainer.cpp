#include "train/trainer.hpp"

#include <omp.h>
#include <sys/resource.h>
#include <cblas.h>

#include <cmath>
#include <csignal>
#include <cstdlib>
#include <string_view>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <utility>
#include <fstream>

#include "core/backend.hpp"
#include "core/cpu/blas_kernels.hpp"
#include "core/error.hpp"
#include "core/timer.hpp"
#include "data/loader.hpp"
#include "data/token_file.hpp"
#include "comm/communicator.hpp"
#include "fsdp/layer_slots.hpp"
#include "comm/nccl_communicator.hpp"
#include "fsdp/sharding.hpp"
#include "fsdp/sharding_plan_ops.hpp"
#include "comm/topology.hpp"
#include "model/model.hpp"
#include "runtime/coherence.hpp"
#include "runtime/executor.hpp"
#include "optim/refresh_schedule.hpp"
#include "optim/sum_of_squares.hpp"
#include "runtime/shadow.hpp"
#include "runtime/tier_manager.hpp"
#include "runtime/worker_pool.hpp"
#include "train/checkpoint/checkpoint_store.hpp"
#include "train/checkpoint/checkpointer.hpp"
#include "train/device_training.hpp"
#include "train/estimates/flops.hpp"
#include "train/lr_schedule.hpp"
#include "train/metrics.hpp"
#include "train/estimates/memory_estimate.hpp"
#include "train/replica_check.hpp"
#include "optim/optimizer_factory.hpp"
#include "train/rank_device.hpp"
#include "train/checkpoint/resume_check.hpp"
#include "train/step_plan.hpp"
#include "train/stop_signals.hpp"
#include "train/tier_config.hpp"
#include "train/estimates/world_plan.hpp"

namespace fs = std::filesystem;

namespace asteria {

namespace {

TokenDtype data_dtype(const Config& cfg) {
  if (cfg.data.dtype == "uint16") return TokenDtype::U16;
  if (cfg.data.dtype == "uint32") return TokenDtype::U32;
  return token_dtype_for_vocab(cfg.model.vocab_size);
}

ShadowDelay shadow_delay(const Config& cfg) {
  const ShadowConfig& c = cfg.runtime.shadow;
  return ShadowDelay{c.delay, c.sync_steps >= 0 ? c.sync_steps : cfg.train.warmup_steps};
}

// The compute lane's threads: runtime.threads, 0 = all cores (what OpenMP has).
// The process's thread counts before any run changed them (OMP_NUM_THREADS, OPENBLAS_NUM_THREADS or
// the cores), taken at load time: runtime.threads 0 means these in every run of a process, not
// whatever an earlier run in the same process set (which would change reduction orders).
const int kDefaultOmpThreads = omp_get_max_threads();
const int kDefaultBlasThreads = openblas_get_num_threads();

int compute_threads(const Config& cfg) { return cfg.runtime.threads > 0 ? cfg.runtime.threads : kDefaultOmpThreads; }

// runtime.shadow.lane, with auto resolved: the host workers only when they have cores of their
// own, i.e. the compute lane's threads and the workers together fit the machine's cores; else
// the root jobs run in parts on the compute lane (on a CPU-only box whose cores the compute lane
// already uses, workers only take cycles from its OpenMP team, which then waits at its barriers).
std::string shadow_lane(const Config& cfg) {
  const std::string& lane = cfg.runtime.shadow.lane;
  if (lane != "auto") return lane;
  return compute_threads(cfg) + cfg.runtime.shadow.threads <= omp_get_num_procs() ? "workers" : "compute";
}

// The process's peak resident memory so far (getrusage; Linux reports KiB).
double peak_rss_bytes() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) * 1024.0;
}

void set_threads(int threads) {
  omp_set_num_threads(threads > 0 ? threads : kDefaultOmpThreads);
  openblas_set_num_threads(threads > 0 ? threads : kDefaultBlasThreads);
}

}  // namespace

struct Trainer::Impl {
  Config cfg;
  std::unique_ptr<Communicator> own_comm;   // local, when the caller gave none
  Communicator* comm = nullptr;
  int rank = 0, world = 1;
  Topology topo;
  std::unique_ptr<Sharding> sharding;
  std::unique_ptr<ShardingPlanOps> sharding_ops;
  // Sharded: the whole-layer buffers in flight (gathered parameters, gradients being reduced).
  std::unique_ptr<LayerSlots> param_slots, grad_slots;
  bool writer() const { return rank == 0; }   // the rank that writes run.dir
  TokenFile train_file, eval_file;
  std::unique_ptr<TrainLoader> loader;
  std::unique_ptr<EvalBatches> eval;
  std::unique_ptr<Model<float>> model;
  // Declared in dependency order: the shadow pipeline uses the pool and the optimizer, the
  // executor the pool; members are destroyed in reverse.
  std::unique_ptr<WorkerPool> pool;
  std::unique_ptr<Optimizer> optimizer;
  // runtime.backend cuda: the model and its update on the GPU; `model` and `optimizer` are then
  // the host image it starts from and checkpoints are written from (device_training.hpp).
  std::unique_ptr<DeviceTraining> device;
  std::unique_ptr<Backend> cpu_backend;   // the tiers' memory on the CPU backend (else device's)
  std::unique_ptr<TierManager> tiers;     // owns the optimizer state's memory
  std::unique_ptr<Coherence> coherence;   // asteria mode with replicas of the optimizer state
  std::unique_ptr<ShadowPipeline> shadow;
  std::unique_ptr<Executor> executor;
  std::unique_ptr<Communicator> device_replicas;   // NCCL, with device and several ranks
  std::unique_ptr<Checkpointer> checkpointer;   // null with checkpoint.enabled false
  std::string resume_dir;                       // the checkpoint restored, or ""
  ResumePoint resumed;
  ModelStepOps model_ops{cfg.model.tied_embeddings,
                         model_recomputed_layers(cfg.model, cfg.train.checkpointing())};
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

  Impl(const Config& c, Communicator* world_comm) : cfg(c) {
    if (!world_comm) {
      own_comm = make_local_communicator();
      world_comm = own_comm.get();
    }
    comm = world_comm;
    rank = comm->rank();
    world = comm->size();
    ASTERIA_CHECK(cfg.distributed.world_size == 0 || cfg.distributed.world_size == world, cfg.source, ": distributed.world_size is ",
                  cfg.distributed.world_size, " but this launch has ", world, " rank(s) (the key plans --dry-run / --print-plan)");
    check_supported_world(cfg, world);
    topo = make_topology(*comm, cfg.distributed.ranks_per_node);
    topo.set_timeout(cfg.distributed.timeout_s);
    if (!topo.note.empty() && writer()) std::fprintf(stderr, "asteria-train: note: %s\n", topo.note.c_str());
    check_supported(cfg);
    // Before any file is opened: a GPU run where there is none says so first. With several
    // ranks each sees only its own GPU, from before the process's first CUDA call.
    if (cfg.runtime.backend == "cuda") {
      std::string where;
      if (world > 1) {
        const std::string mine = rank_visible_devices(topo.local_rank, topo.ranks_per_node, std::getenv("CUDA_VISIBLE_DEVICES"));
        setenv("CUDA_VISIBLE_DEVICES", mine.c_str(), 1);
        where = "rank " + std::to_string(rank) + " (local rank " + std::to_string(topo.local_rank) + " of " +
                std::to_string(topo.ranks_per_node) + ", CUDA_VISIBLE_DEVICES=" + mine + "): ";
      }
      if (std::string why; !cuda_backend_available(&why)) fail("runtime.backend cuda: ", where, why);
    }
    ASTERIA_CHECK(!cfg.data.train.empty(), cfg.source, ": data.train is required to train (a token file "
                  "made by `asteria-data encode`)");
    resume_dir = resolve_resume(cfg);
    // --resume latest with no checkpoint yet (a job stopped before its first one, requeued with
    // the same command) starts the run again from scratch.
    const bool restart = cfg.checkpoint.resume == "latest" && resume_dir.empty();
    if (restart && writer())
      std::fprintf(stderr, "asteria-train: note: no checkpoint under %s/checkpoints; starting fresh\n", cfg.run.dir.c_str());
    if (!resume_dir.empty()) {
      // The checkpoint and its config first: a refused resume changes nothing.
      const Manifest m = read_manifest((fs::path(resume_dir) / "manifest.json").string());
      const Config saved = load_config_text(m.config, resume_dir + "/manifest.json");
      check_resume_compatible(saved, cfg, m, resume_dir);
    } else if (!cfg.run.overwrite && !restart && fs::exists(fs::path(cfg.run.dir) / "metrics.jsonl")) {
      fail("run.dir '", cfg.run.dir, "' already holds a run (metrics.jsonl); choose another run.dir, "
           "set run.overwrite=true, or resume it (--resume latest)");
    }
    // Before anything model-sized is allocated: refuse a run the machine cannot hold.
    // (On the GPU every rank is a whole process's host side: fsdp none.)
    check_memory(cfg, world == 1 || cfg.runtime.backend == "cuda" ? process_memory(cfg) : rank_memory(cfg, world, topo.uniform ? topo.ranks_per_node : 1),
                 topo.ranks_per_node);
    set_threads(cfg.runtime.threads);
    const TokenDtype dtype = data_dtype(cfg);
    train_file = TokenFile(cfg.data.train, dtype, cfg.model.vocab_size);
    loader = std::make_unique<TrainLoader>(train_file, cfg.model.seq_len, cfg.seed);
    if (!cfg.data.eval.empty()) {
      eval_file = TokenFile(cfg.data.eval, dtype, cfg.model.vocab_size);
      eval = std::make_unique<EvalBatches>(eval_file, cfg.model.seq_len, cfg.train.micro_batch,
                                           cfg.data.eval_batches);
    }
    const int B = cfg.train.micro_batch, T = cfg.model.seq_len;
    inputs.resize(static_cast<size_t>(B) * T);
    targets.resize(static_cast<size_t>(B) * T);
    const std::vector<ParamTable> tables = model_param_tables(cfg.model);
    // This rank's part of every layer (all of it unless sharded): its optimizer steps only that.
    sharding = std::make_unique<Sharding>(cfg.distributed.fsdp, topo, tables, cfg.optim.max_preconditioner_dim);
    if (sharding->sharded()) {
      // ZeRO-3: the model runs on whole-layer buffers bound in flight; a rank keeps only its shards.
      model = std::make_unique<Model<float>>(cfg.model, B, Model<float>::Storage::Bound, cfg.train.checkpointing());
      const int L = model->num_layers();
      const bool tied = cfg.model.tied_embeddings;
      param_slots = std::make_unique<LayerSlots>("parameter", ShardingPlanOps::param_buffers(cfg.distributed.prefetch, L, tied),
                                                 sharding->largest_layer(), cfg.distributed.timeout_s);
      grad_slots = std::make_unique<LayerSlots>("gradient", ShardingPlanOps::grad_buffers(tied), sharding->largest_layer(),
                                                cfg.distributed.timeout_s);
      // Every rank computes the whole initial layer (a pure function of the seed) and keeps its part.
      for (int l = 0; l < L; ++l) {
        float* whole = param_slots->acquire(l, model->layer_name(l));
        model->bind_params(l, whole);
        model->init_layer(l, cfg.seed);
        std::copy(whole + sharding->offset(l), whole + sharding->offset(l) + sharding->count(l), sharding->shard_params(l));
        release_params(l);
      }
    } else {
      // On the GPU the host keeps the parameters only, the image the device starts from.
      const auto storage = cfg.runtime.backend == "cuda" ? Model<float>::Storage::Image : Model<float>::Storage::Owned;
      model = std::make_unique<Model<float>>(cfg.model, B, storage, cfg.train.checkpointing());
      model->init(cfg.seed);
    }
    const std::vector<ParamTable>& owned = sharding->owned_tables();
    // The optimizer's state lives where the tiered state manager puts it (by default: all of it
    // in the device tier: GPU memory on CUDA, host memory on the CPU backend), bound below to the
    // tensors of the optimizer that steps there. Placed first: budgets it cannot meet are refused
    // before any device memory is taken.
    TierLayout layout = configured_tier_layout(cfg, owned);
    optimizer = make_optimizer(cfg.optim, owned, cfg.runtime.staggered(), /*own_memory=*/false);
    auto* second_order = dynamic_cast<SecondOrderOptimizer*>(optimizer.get());
    // The whole model's block indices and (staggered) refresh schedule for a rank's blocks.
    if (second_order && sharding->sharded()) second_order->follow_whole_model(tables);
    // On the GPU the device side is allocated now and filled after the restore below; a
    // second-order optimizer's refreshes are then the device twin's (snapshots of device state).
    if (cfg.runtime.backend == "cuda") {
      device = make_device_training(cfg, *model, *optimizer);
      if (second_order) second_order = device->second_order();
    } else {
      cpu_backend = make_cpu_backend();
    }
    tiers = std::make_unique<TierManager>(std::move(layout),
                                          device ? device->device_optimizer() : *optimizer, disk_tier_file(cfg),
                                          device ? device->backend() : *cpu_backend);
    if (device) {
      // Replicas: the gradients' all-reduce in device memory, over NCCL among the same ranks.
      if (Communicator* replicas = sharding->replicas()) {
        device_replicas = make_nccl_communicator(*replicas, /*device=*/0);   // replicas' timeout
        sharding->use_device_replicas(*device_replicas);
      }
    }
    if (cfg.runtime.mode == "asteria" && second_order) {
      const std::string lane = shadow_lane(cfg);
      // The workers compute on the host (workers), or hand the jobs to the GPU's solvers (device).
      if (lane != "compute") pool = std::make_unique<WorkerPool>(cfg.runtime.shadow.threads);
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
                                                /*in_place=*/lane == "device");
    }
    executor = std::make_unique<Executor>(pool.get());
    grad_sq.assign(model->num_layers(), 0.0);
    if (cfg.checkpoint.enabled || !resume_dir.empty()) {
      std::vector<DataFingerprint> data = {token_file_fingerprint("train", cfg.data.train)};
      std::vector<Stateful*> state = {loader.get(), optimizer.get()};   // what saves named fields
      for (Stateful* s : shadow_state_parts(shadow.get())) state.push_back(s);
      checkpointer = std::make_unique<Checkpointer>(cfg, RunParts{*model, *optimizer, *tiers, state, sharding.get()},
                                                    std::move(data));
      // First: an async checkpoint's copy precedes every tier move on the staging lane.
      builder.add_contributor(&checkpointer->plan_ops());
      checkpointer->bind(*executor);
    }
    builder.add_contributor(&model_ops);
    sharding_ops = std::make_unique<ShardingPlanOps>(sharding->sharded(), sharding->reduces(), cfg.distributed.prefetch,
                                                     cfg.model.tied_embeddings);
    builder.add_contributor(sharding_ops.get());
    // The shadow pipeline's publish_wait(l) and the tiers' tier_wait(l) go before the
    // optimizer's optim_step(l).
    if (shadow) {
      builder.add_contributor(&shadow->plan_ops());
      shadow->bind(*executor);
    }
    builder.add_contributor(&tiers->planner());
    tiers->bind(*executor);
    builder.add_contributor(&optim_ops);
    bind_handlers();
    if (!resume_dir.empty()) resumed = checkpointer->restore(resume_dir);
    // After the restore: the device starts from the image as restored.
    if (device) device->upload();
    // Every rank has checked everything before rank 0 writes anything into run.dir.
    comm->barrier("the ranks' startup checks");
  }

  // Sums over the ranks, in place (a no-op on one rank).
  template <class T>
  void sum_over_ranks(T* data, size_t count, const std::string& label) {
    if (world == 1) return;
    Request r = comm->all_reduce(data, count, label);
    comm->wait(r);
  }

  // The replicas must hold the same bits (train/replica_check.hpp): this rank's tensors (its
  // shards when sharded) against those of the first rank holding the same part.
  void check_replicas_identical(const std::string& when) {
    if (world == 1) return;
    if (device) device->download_params();   // the device's parameters into the image hashed here
    const bool sharded = sharding->sharded();
    std::vector<TensorBits> tensors;
    for (int l = 0; l < model->num_layers(); ++l) {
      const float* p = sharded ? sharding->shard_params(l) : model->params(l);
      for (const ParamEntry& e : sharding->owned_tables()[l].entries) {
        std::string name = e.name;
        if (e.tensor_rows > 0)
          name += " (rows " + std::to_string(e.row_offset) + "-" + std::to_string(e.row_offset + e.shape[0] - 1) + ")";
        tensors.push_back({std::move(name), p + e.offset, e.numel});
      }
    }
    asteria::check_replicas_identical(*comm, sharding->group_rank(), tensors, when);
  }

  // Before the first step writes anything: stale checkpoint directories go, a resumed run's
  // metrics are cut back to its checkpoint, and a fresh run with run.overwrite drops the old
  // run's checkpoints (or `latest` would find them).
  void prepare_run_dir(const fs::path& dir) {
    const std::string root = (dir / "checkpoints").string();
    if (resume_dir.empty() && cfg.run.overwrite && fs::exists(root)) {
      std::fprintf(stderr, "asteria-train: note: run.overwrite: removing the checkpoints of the earlier run in %s\n",
                   root.c_str());
      fs::remove_all(root);
    }
    for (const std::string& p : remove_stale_checkpoints(root))
      std::fprintf(stderr, "asteria-train: note: removed %s, an incomplete checkpoint\n", p.c_str());
    if (!resume_dir.empty()) {
      truncate_metrics_after((dir / "metrics.jsonl").string(), resumed.step);
      std::fprintf(stderr, "asteria-train: resuming from %s (step %lld)\n", resume_dir.c_str(),
                   static_cast<long long>(resumed.step));
    }
  }

  void bind_handlers() {
    const int last = model->num_layers() - 1;
    const double grad_scale = 1.0 / cfg.train.grad_accum;
    executor->bind(OpKind::LoadBatch, [this](const Op&) {
      loader->next_batch(cfg.train.micro_batch, inputs.data(), targets.data(), rank, world);
      device ? device->set_batch(inputs.data(), targets.data()) : model->set_batch(inputs.data(), targets.data());
    });
    executor->bind(OpKind::Forward, [this, last](const Op& op) {
      double loss = device ? device->forward(op.layer) : model->forward(op.layer);
      if (op.layer == last) loss_sum += loss;
    });
    executor->bind(OpKind::Recompute, [this](const Op& op) { device ? device->recompute(op.layer) : model->recompute(op.layer); });
    executor->bind(OpKind::Backward, [this, grad_scale, last](const Op& op) {
      if (grad_slots) {
        // Sharded: a zeroed gradient buffer for the layer (and the embedding's, for the tied head).
        bind_grad_buffer(op.layer);
        if (op.layer == last && cfg.model.tied_embeddings) bind_grad_buffer(0);
      }
      device ? device->backward(op.layer, grad_scale) : model->backward(op.layer, grad_scale);
    });
    executor->bind(OpKind::Gather, [this](const Op& op) { gather_params(op.layer, ""); });
    executor->bind(OpKind::Release, [this](const Op& op) { release_params(op.layer); });
    const int micros = cfg.train.grad_accum;
    // Sharded: the group's sum of this rank's part of the micro-batch's gradient, into its shard;
    // after the last micro-batch the mean over every rank.
    executor->bind(OpKind::ReduceScatter, [this, micros](const Op& op) {
      const std::string what = "the gradient of " + model->layer_name(op.layer);
      sharding->reduce_scatter(op.layer, model->grads(op.layer), "reduce_scatter of " + what);
      model->bind_grads(op.layer, nullptr);
      grad_slots->release(op.layer);
      if (op.micro == micros - 1) sharding->reduce_over_replicas(op.layer, sharding->shard_grads(op.layer), "all_reduce of " + what);
    });
    // Replicated: the mean over the ranks of the whole gradient (each already the mean of its micro-batches).
    executor->bind(OpKind::AllReduce, [this](const Op& op) {
      float* g = device ? device->grads(op.layer) : model->grads(op.layer);
      sharding->reduce_over_replicas(op.layer, g, "all_reduce of the gradient of " + model->layer_name(op.layer));
    });
    executor->bind(OpKind::GradNorm, [this](const Op& op) {
      grad_sq[op.layer] = device ? device->grad_sum_of_squares(op.layer)
                                 : sum_of_squares(own_grads(op.layer), sharding->count(op.layer));
    });
    executor->bind(OpKind::ClipGrads, [this](const Op&) {
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
    });
    executor->bind(OpKind::OptimStep, [this](const Op& op) {
      if (device) {
        device->optim_step(op.layer, clip_scale, lr, step);
        return;
      }
      if (sharding->sharded()) {
        optimizer->step_layer(op.layer, sharding->shard_params(op.layer), sharding->shard_grads(op.layer), clip_scale, lr, step);
        sharding->zero_shard_grads(op.layer);
        return;
      }
      float* g = model->grads(op.layer);
      optimizer->step_layer(op.layer, model->params(op.layer), g, clip_scale, lr, step);
      std::fill(g, g + model->table(op.layer).numel, 0.0f);
    });
  }

  // The gradient this rank steps layer l with: its shard (sharded) or the whole gradient.
  const float* own_grads(int layer) { return sharding->sharded() ? sharding->shard_grads(layer) : model->grads(layer); }

  // Sharded: layer l's whole parameters from the shards into a buffer of the pool, bound to the model.
  void gather_params(int layer, const char* why) {
    float* whole = param_slots->acquire(layer, model->layer_name(layer));
    sharding->gather(layer, whole, "gather of " + model->layer_name(layer) + why);
    model->bind_params(layer, whole);
  }

  void release_params(int layer) {
    model->bind_params(layer, nullptr);
    param_slots->release(layer);
  }

  void bind_grad_buffer(int layer) {
    if (model->grads(layer)) return;
    float* g = grad_slots->acquire(layer, model->layer_name(layer));
    std::fill(g, g + model->table(layer).numel, 0.0f);
    model->bind_grads(layer, g);
  }

  double evaluate() {
    const int L = model->num_layers();
    const bool sharded = sharding->sharded(), tied = cfg.model.tied_embeddings;
    double sum = 0;
    for (int b = 0; b < eval->count(); ++b) {
      eval->get(b, inputs.data(), targets.data());
      if (device) {
        device->set_batch(inputs.data(), targets.data());
        for (int l = 0; l < L; ++l) device->forward(l);
        sum += device->last_ce_loss();
        continue;
      }
      model->set_batch(inputs.data(), targets.data());
      for (int l = 0; l < L; ++l) {
        // Sharded: each layer gathered for its forward (no step is running: the compute lane
        // calls the communicator), the embedding kept until the tied head has read it.
        if (sharded) gather_params(l, " for eval");
        model->forward(l);
        if (sharded && !(tied && l == 0)) release_params(l);
      }
      if (sharded && tied) release_params(0);
      sum += model->last_ce_loss();
    }
    return sum / eval->count();
  }

  TrainResult run() {
    const fs::path dir = cfg.run.dir;
    if (writer()) {
      fs::create_directories(dir);
      prepare_run_dir(dir);
      write_text_durably(dir / "config.yaml", config_to_yaml(cfg));
    }
    const int threads = compute_threads(cfg);
    const double peak = cfg.run.peak_flops > 0 ? cfg.run.peak_flops
                        : device                 ? device->dense_bf16_peak_flops()
                                                 : cpu_peak_flops(threads);
    const double flops_per_token = training_flops_per_token(cfg.model);
    const int64_t tokens_per_step =
        static_cast<int64_t>(cfg.train.micro_batch) * cfg.train.grad_accum * cfg.model.seq_len * world;
    {
      nlohmann::json info = {{"params", model->num_params()},
                             {"flops_per_token", flops_per_token},
                             {"flop_formula", training_flops_formula()},
                             {"peak_flops", peak},
                             {"peak_formula", cfg.run.peak_flops > 0 ? "run.peak_flops"
                                              : device ? (peak > 0 ? "the GPU's dense bf16 tensor-core peak"
                                                                   : "unknown GPU: set run.peak_flops")
                                                       : "threads x cpu MHz x 32 fp32 FLOP/cycle (AVX2 FMA)"},
                             {"backend", device ? device->device_name() : "cpu"},
                             {"precision", cfg.runtime.precision},
                             {"threads", threads},
                             {"blas", blas_report()},
                             {"tokens_per_step", tokens_per_step}};
      if (shadow) info["shadow_lane"] = shadow_lane(cfg);
      info["ranks"] = world;
      if (writer()) write_text_durably(dir / "run_info.json", info.dump(2) + "\n");
    }
    MetricsWriter metrics = writer() ? MetricsWriter((dir / "metrics.jsonl").string(), !resume_dir.empty()) : MetricsWriter();
    ProgressLine progress(cfg.train.steps, cfg.run.log_every);

    TrainResult result;
    result.last_step = resumed.step;
    Timer wall;
    const double elapsed0 = resumed.elapsed_s;   // a resumed run's clock goes on
    double timed_tokens = 0, timed_seconds = 0, energy_j_total = 0;
    const StopSignals signals;
    // Per step, summed over the ranks: loss, stop flag, the ranks with a sharded async
    // checkpoint to publish and those of them still writing their file, then each rank's
    // figures that differ between ranks (kPerRank of them, the list of every rank's for each).
    enum Shared { kLoss, kStop, kCkptPending, kCkptWriting, kCohIntra, kCohInter, kCohShipped, kCohSkipped, kShared };
    enum PerRank { kPeakRss, kCommWait, kComm, kBytesGroup, kBytesReplicas, kComputed, kPerRank };
    std::vector<double> shared(kShared + kPerRank * static_cast<size_t>(world));
    const auto by_rank = [&](PerRank f) {
      return std::vector<double>(shared.begin() + kShared + f * world, shared.begin() + kShared + (f + 1) * world);
    };
    const int64_t last = cfg.train.stop_after > 0 ? std::min(cfg.train.stop_after, cfg.train.steps) : cfg.train.steps;
    for (step = resumed.step + 1; step <= last; ++step) {
      lr = lr_at(step, cfg.optim.lr, cfg.train);
      builder.build({step, model->num_layers(), cfg.train.grad_accum}, plan);
      loss_sum = 0;
      executor->reset_times();
      const std::optional<double> energy0 = device ? device->energy_j() : std::nullopt;
      Timer t;
      executor->run(plan);
      // The loss over the ranks, whether any rank was asked to stop (all stop together), and
      // each rank's figures: peak memory (its part of the state differs when sharded), how long
      // its compute lane waited for collectives (a forward or backward for its gather, a
      // grad_norm for its reduction: the comm not hidden behind compute), its comm lane's time
      // in collectives and the bytes it moved.
      const double comm_wait_s = executor->wait_seconds(OpKind::Forward) + executor->wait_seconds(OpKind::Backward) +
                                 executor->wait_seconds(OpKind::Recompute) +
                                 executor->wait_seconds(OpKind::GradNorm);
      const CommBytes bytes = sharding->take_bytes();
      std::fill(shared.begin(), shared.end(), 0.0);
      shared[kLoss] = loss_sum;
      shared[kStop] = static_cast<double>(signals.pending());
      const bool ckpt_pending = checkpointer && checkpointer->shard_write_pending();
      shared[kCkptPending] = ckpt_pending ? 1 : 0;
      shared[kCkptWriting] = ckpt_pending && !checkpointer->shard_written() ? 1 : 0;
      const auto mine = [&](PerRank f) -> double& { return shared[kShared + f * world + rank]; };
      mine(kPeakRss) = peak_rss_bytes();
      mine(kCommWait) = comm_wait_s;
      mine(kComm) = executor->seconds(OpKind::Gather) + executor->seconds(OpKind::ReduceScatter) +
                    executor->seconds(OpKind::AllReduce);
      mine(kBytesGroup) = static_cast<double>(bytes.group);         // exact below 2^53
      mine(kBytesReplicas) = static_cast<double>(bytes.replicas);
      if (shadow) mine(kComputed) = static_cast<double>(shadow->computed());
      if (coherence) {
        // Bytes: what each rank sent; versions: one replica per replica group counts its group's.
        const CoherenceTraffic traffic = coherence->take_traffic();
        shared[kCohIntra] = static_cast<double>(traffic.bytes_intra);
        shared[kCohInter] = static_cast<double>(traffic.bytes_inter);
        const int64_t shipped = coherence->registry().take_shipped(), skipped = coherence->registry().take_skipped();
        if (coherence->replica_rank() == 0) {
          shared[kCohShipped] = static_cast<double>(shipped);
          shared[kCohSkipped] = static_cast<double>(skipped);
        }
      }
      sum_over_ranks(shared.data(), shared.size(), "the loss of step " + std::to_string(step));
      const double step_s = t.seconds();
      const double loss = shared[kLoss] / (cfg.train.grad_accum * world);
      // A sharded async checkpoint every writing rank has written: all of them publish it now.
      if (shared[kCkptPending] > 0 && shared[kCkptWriting] == 0 && ckpt_pending) checkpointer->finish();
      ASTERIA_CHECK(std::isfinite(loss), "training diverged: loss is ", loss, " at step ", step);
      const double tps = tokens_per_step / step_s;
      if (step > resumed.step + 1) {
        timed_tokens += static_cast<double>(tokens_per_step);
        timed_seconds += step_s;
      }
      nlohmann::json rec = {
          {"step", step},
          {"loss", loss},
          {"lr", lr},
          {"grad_norm", grad_norm},
          {"tokens", step * tokens_per_step},
          {"tokens_per_s", tps},
          {"mfu", peak > 0 ? tps * flops_per_token / peak : 0.0},
          {"step_time_s", step_s},
          {"data_s", executor->seconds(OpKind::LoadBatch)},
          {"fwd_s", executor->seconds(OpKind::Forward)},
          {"recompute_s", executor->seconds(OpKind::Recompute)},
          {"bwd_s", executor->seconds(OpKind::Backward)},
          {"optim_s", executor->seconds(OpKind::GradNorm) + executor->seconds(OpKind::ClipGrads) +
                          executor->seconds(OpKind::OptimStep)},
          {"elapsed_s", elapsed0 + wall.seconds()},
          {"peak_rss_bytes", by_rank(kPeakRss)}};
      if (replica_check_s > 0) rec["replica_check_s"] = std::exchange(replica_check_s, 0.0);
      if (cfg.model.z_loss > 0) rec["z_loss"] = device ? device->last_z_loss() : model->last_z_loss();
      if (const std::optional<double> energy1 = device ? device->energy_j() : std::nullopt; energy0 && energy1) {
        rec["energy_j"] = *energy1 - *energy0;   // the GPU's, over the step (NVML)
        energy_j_total += *energy1 - *energy0;
        rec["energy_j_total"] = energy_j_total;
      }
      if (sharding->reduces()) {
        // Rank 0's figures, and every rank's in the _by_rank lists.
        rec["comm_s"] = mine(kComm);
        rec["comm_s_by_rank"] = by_rank(kComm);
        rec["comm_wait_s"] = comm_wait_s;
        rec["comm_wait_s_by_rank"] = by_rank(kCommWait);
        rec["comm_bytes"] = {{"shard_group", bytes.group}, {"replicas", bytes.replicas}};
        rec["comm_bytes_by_rank"] = {{"shard_group", by_rank(kBytesGroup)}, {"replicas", by_rank(kBytesReplicas)}};
      }
      if (coherence) {
        rec["coherence_bytes_intra"] = shared[kCohIntra];
        rec["coherence_bytes_inter"] = shared[kCohInter];
        rec["coherence_shipped_blocks"] = shared[kCohShipped];
        rec["coherence_skipped_versions"] = shared[kCohSkipped];
        rec["coherence_s"] = executor->seconds(OpKind::CoherenceSync);   // rank 0's comm lane in the syncs
        // Rank 0's replica group's blocks.
        const Staleness st = coherence->registry().staleness(step);
        rec["staleness_max"] = {{"versions", st.max_versions}, {"steps", st.max_steps}};
        rec["staleness_mean"] = {{"versions", st.mean_versions}, {"steps", st.mean_steps}};
        // How far rank 0's group's new versions moved from the adopted ones (for choosing a tolerance).
        const VersionChanges ch = coherence->take_changes();
        if (ch.versions > 0) rec["coherence_change"] = {{"mean", ch.sum / static_cast<double>(ch.versions)}, {"max", ch.max}};
      }
      if (shadow) rec["shadow_computed_by_rank"] = by_rank(kComputed);   // refreshes each rank computed so far
      if (param_slots) {
        // Rank 0's most whole-layer buffers held at once this step (of the pools' sizes).
        rec["fsdp_buffers_held"] = {{"params", param_slots->take_peak_held()}, {"grads", grad_slots->take_peak_held()}};
      }
      {
        const TierStats ts = tiers->take_stats();
        rec["tier_bytes"] = {{"device", ts.resident[0]}, {"host", ts.resident[1]}, {"disk", ts.resident[2]}};
        rec["tier_device_peak_bytes"] = ts.device_peak;
        rec["tier_moved_bytes"] = {{"host_to_device", ts.host_to_device},
                                   {"device_to_host", ts.device_to_host},
                                   {"disk_to_device", ts.disk_to_device},
                                   {"device_to_disk", ts.device_to_disk}};
        rec["tier_stall_s"] = executor->wait_seconds(OpKind::TierWait);
        rec["tier_staging_s"] = executor->seconds(OpKind::TierEvict) + executor->seconds(OpKind::TierPrefetch);
      }
      if (shadow) {
        rec["shadow_stall_s"] = shadow->take_stall_seconds();
        rec["shadow_in_flight"] = shadow->in_flight();
        rec["shadow_published"] = shadow->published();
        rec["staging_s"] = executor->seconds(OpKind::Snapshot);
        // runtime.shadow.lane compute: the step's root jobs on the compute lane.
        if (!pool) rec["root_jobs_s"] = executor->seconds(OpKind::RootJobBatch);
      }
      double eval_loss = -1;
      const bool eval_due = eval && ((cfg.train.eval_every > 0 && step % cfg.train.eval_every == 0) ||
                                     step == cfg.train.steps);
      if (eval_due) {
        Timer te;
        eval_loss = evaluate();
        sharding->take_bytes();   // eval's gathers are no step's comm
        rec["eval_loss"] = eval_loss;
        rec["eval_s"] = te.seconds();
        result.final_eval_loss = eval_loss;
      }
      // The step's metrics line first: a checkpoint of step N always finds lines 1..N written,
      // so a resumed metrics.jsonl (cut back to N) never misses one. The checkpoint times of
      // the last save (the hold between it and this step) go on this line.
      if (checkpointer) {
        const CheckpointTimes ct = checkpointer->take_times();
        // The save's own hold plus this step's wait for the async copy, which ran beside its forward.
        const double held = ct.hold_s + executor->wait_seconds(OpKind::CheckpointWait);
        if (held > 0) rec["checkpoint_s"] = held;
        if (executor->seconds(OpKind::CheckpointCopy) > 0) rec["checkpoint_copy_s"] = executor->seconds(OpKind::CheckpointCopy);
        if (ct.bytes > 0) {
          rec["checkpoint_bytes"] = ct.bytes;
          rec["checkpoint_write_s"] = ct.write_s;
        }
      }
      metrics.write(rec);
      if (writer()) progress.update(step, loss, tps, elapsed0 + wall.seconds(), eval_loss);
      // A checkpoint every checkpoint.every steps, at the last step, and when a signal asks.
      const int sig = shared[kStop] > 0 ? (signals.pending() ? signals.pending() : SIGTERM) : 0;
      // One rank writes a replicated run's checkpoint; every rank of one shard group a sharded one's.
      if (checkpointer && cfg.checkpoint.enabled &&
          ((cfg.checkpoint.every > 0 && step % cfg.checkpoint.every == 0) || step == last || sig)) {
        // Replicas: the owners hand their refreshes in flight to the writing replica (every rank).
        if (shadow) shadow->prepare_checkpoint();
        if (device) device->download();   // the image the checkpoint is written from
        if (sharding->writes_checkpoints()) {
          checkpointer->save(step, step * tokens_per_step, elapsed0 + wall.seconds(), step < last && !sig);
          result.checkpoint = (fs::path(checkpointer->root()) / checkpoint_dir_name(step)).string();
        }
      }
      result.final_loss = loss;
      result.last_step = step;
      if (sig) {
        result.signal = sig;
        break;
      }
    }
    // Resumed with nothing left to train (train.stop_after or train.steps at the checkpoint's
    // step): the loaded state is written as this run's checkpoint of that step, at this run's
    // world size and sharding (a checkpoint re-laid out for another launch).
    if (checkpointer && cfg.checkpoint.enabled && !resume_dir.empty() && resumed.step >= last && shadow)
      shadow->prepare_checkpoint();
    if (checkpointer && cfg.checkpoint.enabled && !resume_dir.empty() && resumed.step >= last &&
        sharding->writes_checkpoints()) {
      const int64_t s = resumed.step;
      checkpointer->save(s, s * tokens_per_step, resumed.elapsed_s, false);
      result.checkpoint = (fs::path(checkpointer->root()) / checkpoint_dir_name(s)).string();
    }
    if (checkpointer) checkpointer->finish();
    if (device) device->download();   // final_params() reads the image
    if (writer()) progress.finish();
    check_replicas_identical("the end of training");
    result.tokens_per_s = timed_seconds > 0 ? timed_tokens / timed_seconds : 0;
    // Sharded: the whole parameters on every rank, gathered from the shards now (a collective,
    // so not on demand). One process reads them from the model when asked, so that a model that
    // fills the machine is not copied at the end.
    final_params.clear();
    if (sharding->sharded())
      for (int l = 0; l < model->num_layers(); ++l) {
        std::vector<float>& p = final_params.emplace_back(model->table(l).numel);
        sharding->gather(l, p.data(), "gather of " + model->layer_name(l) + " after the last step");
      }
    return result;
  }
};

Trainer::Trainer(const Config& cfg, Communicator* world) : impl_(std::make_unique<Impl>(cfg, world)) {}
Trainer::~Trainer() = default;
TrainResult Trainer::run() { return impl_->run(); }
std::vector<float> Trainer::final_params(int layer) const {
  if (!impl_->final_params.empty()) return impl_->final_params.at(layer);
  const float* p = impl_->model->params(layer);
  return std::vector<float>(p, p + impl_->model->table(layer).numel);
}
int Trainer::num_layers() const { return impl_->model->num_layers(); }

std::string describe_step_plan(const Config& cfg, int64_t step) {
  const auto tables = model_param_tables(cfg.model);
  const std::vector<std::string> names = model_layer_names(cfg.model);
  const int L = static_cast<int>(tables.size());
  ModelStepOps model_ops(cfg.model.tied_embeddings,
                         model_recomputed_layers(cfg.model, cfg.train.checkpointing()));
  OptimizerStepOps optim_ops;
  PlanBuilder builder;
  builder.add_contributor(&model_ops);
  // distributed.world_size: the comm lane's ops of a launch of that many ranks, as the trainer
  // adds them (after the model's ops, before the optimizer's).
  std::unique_ptr<WorldPlan> world;
  std::unique_ptr<ShardingPlanOps> sharding_ops;
  std::string comm_note;
  if (cfg.distributed.world_size > 0) {
    world = std::make_unique<WorldPlan>(plan_world(cfg));
    const PlannedWorld& w = world->world;
    sharding_ops = std::make_unique<ShardingPlanOps>(w.sharded(), w.reduces(), cfg.distributed.prefetch, cfg.model.tied_embeddings);
    builder.add_contributor(sharding_ops.get());
    comm_note = "comm lane: world " + std::to_string(w.world) + ", distributed.fsdp " + w.mode + " (shard group of " +
                std::to_string(w.group) + ", " + std::to_string(w.replicas) + " replica(s)); " +
                (w.sharded() ? "gathers " + std::to_string(cfg.distributed.prefetch) + " layer(s) ahead, in " +
                                   std::to_string(ShardingPlanOps::param_buffers(cfg.distributed.prefetch, L, cfg.model.tied_embeddings)) +
                                   " parameter and " + std::to_string(ShardingPlanOps::grad_buffers(cfg.model.tied_embeddings)) +
                                   " gradient buffer(s) of whole layers\n"
                             : std::string(w.reduces() ? "replicated: one all_reduce per layer\n" : "one rank: no collectives\n"));
  }
  // The shadow pipeline's ops follow from the refresh schedule alone: no optimizer state needed.
  std::unique_ptr<RefreshSchedule> schedule;
  std::unique_ptr<RootJobPlacement> placement;
  std::unique_ptr<ShadowPlanOps> shadow_ops;
  std::string note;
  if (cfg.optim.name != "adamw") {
    std::vector<std::vector<MatrixBlock>> blocks;
    std::vector<int> counts;
    for (int l = 0; l < L; ++l) {
      blocks.push_back(layer_blocks(l, tables[l], cfg.optim.max_preconditioner_dim, cfg.optim.precondition_embeddings));
      counts.push_back(static_cast<int>(blocks.back().size()));
    }
    schedule = std::make_unique<RefreshSchedule>(cfg.optim.name, cfg.optim.precondition_frequency,
                                                 cfg.optim.start_preconditioning_step, cfg.runtime.staggered(), blocks);
    int due = 0;
    for (int l = 0; l < L; ++l)
      for (int b = 0; b < counts[l]; ++b) due += schedule->due(l, b, step);
    const ShadowDelay delay = shadow_delay(cfg);
    const std::string lane = shadow_lane(cfg);
    const bool workers = lane != "compute";
    note = "refreshes at this step: " + std::to_string(due) + " block(s) (" +
           (cfg.runtime.mode == "asteria"
                ? "shadow pipeline, delay " + std::to_string(delay.at(step)) + ", root jobs on the " +
                      (lane == "device"  ? "workers, by the GPU's solvers"
                       : workers        ? "host workers"
                                        : "compute lane, in parts")
                : std::string("native: inline in optim_step")) +
           ")\n";
    if (cfg.runtime.mode == "asteria") {
      if (!workers && delay.delay > 0)
        placement = std::make_unique<RootJobPlacement>(*schedule, refresh_part_costs(cfg.optim.name, blocks), delay,
                                                       compute_threads(cfg));
      // A planned launch with replicated state: the coherence_sync ops too.
      const bool coherent = world && plan_coherence(cfg, *world).active;
      shadow_ops = std::make_unique<ShadowPlanOps>(*schedule, counts, delay, placement.get(), coherent);
      builder.add_contributor(shadow_ops.get());
    }
  }
  // The tiers' moves depend on what earlier steps left on the device: plan every step up to this
  // one (plans are cheap to build; nothing runs).
  const TierLayout layout = configured_tier_layout(cfg);
  TierPlanner tiers(layout);
  builder.add_contributor(&tiers);
  builder.add_contributor(&optim_ops);
  Plan plan;
  for (int64_t s = 1; s <= step; ++s) builder.build({s, L, cfg.train.grad_accum}, plan);
  return plan.describe(names, [&](const Op& op) {
           if (op.lane == Lane::Comm && world) return comm_op_detail(*world, op, cfg.train.grad_accum);
           return op.kind == OpKind::RootJobBatch ? shadow_ops->describe(op, names) : tiers.describe(op);
         }) + note + comm_note;
}

}  // namespace asteria
