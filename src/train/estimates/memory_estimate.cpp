#include "train/estimates/memory_estimate.hpp"

#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <vector>
#include <limits>
#include <optional>
#include <sstream>

#include "core/error.hpp"
#include "core/memory_limits.hpp"
#include "model/model.hpp"
#include "optim/blocks.hpp"
#include "train/estimates/flops.hpp"
#include "optim/optimizer_factory.hpp"
#include "optim/thread_scratch.hpp"
#include "train/run_settings.hpp"
#include "train/tier_config.hpp"
#include "train/estimates/world_plan.hpp"

namespace asteria {

std::string human_bytes(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (b >= 1024 && u < 4) {
    b /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f %s", b, units[u]);
  return buf;
}

// Measured (tests/train/estimates/memory_estimate_test.cpp): a job holds three fp64 matrices per
// side (the factor, the basis or root, the carry or installed copy between parts; a QR carry's
// columns are padded by 8 entries) and a few index vectors.
double refresh_job_bytes(int64_t rows, int64_t cols) {
  return 3.0 * sizeof(double) * static_cast<double>(rows * rows + cols * cols) +
         (16.0 + 8.0 * sizeof(double)) * static_cast<double>(rows + cols);
}

// The workspace's own scratch (four n x n fp64 matrices, one with padded columns, and some
// vectors, measured) and what it
// keeps for LAPACK: the column-major copy (n^2) and dsyevd's work arrays (1 + 6n + 2n^2 doubles,
// 3 + 5n ints; geqrf's and orgqr's are smaller).
double refresh_workspace_bytes(int64_t n) {
  const double nn = static_cast<double>(n * n), nd = static_cast<double>(n);
  return sizeof(double) * (4.0 * nn + 10.0 * nd) + sizeof(double) * (nn + 1.0 + 6.0 * nd + 2.0 * nn) +
         sizeof(int) * (3.0 + 5.0 * nd);
}

namespace {

// The refresh buffers in memory, and the jobs in flight parked on the disk tier beyond
// runtime.shadow.resident_jobs (runtime/shadow_job_store.hpp).
struct RefreshWork {
  double in_memory = 0, on_disk = 0;
};

RefreshWork refresh_work(const Config& cfg, const std::vector<ParamTable>& tables) {
  const OptimizerDescription& d = describe(cfg.optim.name);
  if (!d.refreshes) return {d.work_bytes(cfg.optim, tables), 0};   // its step's buffers, if any
  double largest_grad = 0, largest_ws = 0;
  std::vector<double> jobs;
  for (int l = 0; l < static_cast<int>(tables.size()); ++l)
    for (const MatrixBlock& b : layer_blocks(l, tables[l], cfg.optim.max_preconditioner_dim,
                                             cfg.optim.precondition_embeddings)) {
      jobs.push_back(refresh_job_bytes(b.rows, b.cols));
      largest_grad = std::max(largest_grad, static_cast<double>(b.rows * b.cols) * sizeof(float));
      largest_ws = std::max(largest_ws, refresh_workspace_bytes(std::max(b.rows, b.cols)));
    }
  if (jobs.empty()) return {};
  std::sort(jobs.begin(), jobs.end(), std::greater<>());
  const int threads = cfg.runtime.threads > 0 ? cfg.runtime.threads : omp_get_max_threads();
  // Each compute thread's scratch (optim/thread_scratch.hpp): the algorithms' temporaries, the
  // gradient block and the update direction, each slot as large as the largest block.
  RefreshWork w;
  w.in_memory = threads * kThreadScratchSlots * largest_grad;
  if (cfg.runtime.mode != RuntimeMode::Asteria) {
    // Native: each compute thread refreshes inline, with a job and the eigensolver's workspace.
    w.in_memory += threads * (jobs[0] + largest_ws);
    return w;
  }
  // The shadow pipeline computes every refresh in its jobs, with a workspace per host worker
  // (per compute thread on the compute lane); the compute threads' own are never used. Jobs
  // open: a synchronous refresh holds one while it runs, one per compute thread at most;
  // after the warm-up each refresh is open for D + 1 steps, so (D + 1) steps' worth of
  // refreshes (a tenth of the blocks per step when staggered over F = 10, all of them at once
  // when not), counted as the largest blocks'. runtime.shadow.resident_jobs keeps at most that
  // many in memory (the largest) and parks the rest on the disk tier.
  const int workers = shadow_lane(cfg) == ShadowLane::Workers ? cfg.runtime.shadow.threads : threads;
  w.in_memory += workers * largest_ws;
  std::vector<double> held(static_cast<size_t>(threads), jobs[0]);
  const int64_t sync_steps = cfg.runtime.shadow.sync_steps >= 0 ? cfg.runtime.shadow.sync_steps : cfg.train.warmup_steps;
  if (sync_steps < cfg.train.steps) {
    const int64_t n = static_cast<int64_t>(jobs.size()), F = cfg.optim.precondition_frequency;
    const int64_t per_step = cfg.runtime.staggered() ? (n + F - 1) / F : n;
    const int64_t open = std::min(n, (cfg.runtime.shadow.delay + 1) * per_step);
    held.insert(held.end(), jobs.begin(), jobs.begin() + open);
  }
  const size_t resident = cfg.runtime.shadow.resident_jobs > 0 ? static_cast<size_t>(cfg.runtime.shadow.resident_jobs) : held.size();
  for (size_t i = 0; i < held.size(); ++i) (i < resident ? w.in_memory : w.on_disk) += held[i];
  return w;
}

// The largest rank of a sharded launch on the device (runtime.backend cuda, distributed.world_size
// > 1, fsdp full or hybrid): its figures and its shard tables; nullopt for any other run.
struct ShardedDeviceRank {
  RankFigures figures;
  std::vector<ParamTable> tables;
  size_t largest_layer = 0;
};
std::optional<ShardedDeviceRank> sharded_device_rank(const Config& cfg, TierCheck tier_check) {
  if (cfg.runtime.backend != BackendKind::Cuda || cfg.distributed.world_size <= 1) return std::nullopt;
  if (!planned_world(cfg).sharded()) return std::nullopt;
  const WorldPlan plan = plan_world(cfg, tier_check);
  ShardedDeviceRank r;
  r.largest_layer = plan.largest_layer;
  for (const RankFigures& f : plan.ranks)
    if (r.tables.empty() || f.total_bytes() > r.figures.total_bytes()) {
      r.figures = f;
      r.tables.clear();
      for (size_t l = 0; l < plan.tables.size(); ++l)
        r.tables.push_back(shard_table(plan.tables[l], plan.shards[l], f.group_rank, shard_unit_rows(cfg.optim)));
    }
  return r;
}

}  // namespace

Config planned_launch(const Config& cfg, int world, int ranks_per_node) {
  Config c = cfg;
  if (world <= 1) return c;
  c.distributed.world_size = world;
  if (c.distributed.ranks_per_node <= 0) c.distributed.ranks_per_node = ranks_per_node;
  return c;
}

MemoryEstimate process_memory(const Config& cfg, TierCheck tier_check) {
  MemoryEstimate m;
  const std::vector<ParamTable> tables = model_param_tables(cfg.model);
  const ParamCounts pc = count_params(cfg.model);
  m.params = m.grads = static_cast<double>(pc.total) * sizeof(float);
  if (cfg.runtime.tiers.params.home == ParamsHome::Disk && cfg.runtime.backend != BackendKind::Cuda) {
    // The blocks on the disk tier, a few in flight (the model binds them: no bf16 copies).
    const ParamOffloadBytes pb = params_bytes(cfg);
    m.params = static_cast<double>(pb.in_memory);
    m.params_on_disk = static_cast<double>(pb.on_disk);
  } else if (cfg.runtime.precision == ComputePrecision::Bf16 && cfg.runtime.backend != BackendKind::Cuda) {
    // The CPU model's GEMMs' bf16 copy of the weights (model.hpp; on CUDA it is the device's).
    m.params += static_cast<double>(model_bf16_weight_copy_bytes(cfg.model));
  }
  const OptimizerStateBytes ob = optimizer_state_bytes(cfg.optim, tables);
  const TierLayout layout = configured_tier_layout(cfg, tables, tier_check);
  double on_disk = 0;
  for (const auto& by_tier : layout.by_class) on_disk += static_cast<double>(by_tier[static_cast<int>(Tier::Disk)]);
  m.optimizer_on_disk = on_disk;
  m.optimizer = static_cast<double>(ob.total()) - on_disk + static_cast<double>(layout.device_cache_bytes);
  if (m.optimizer < 0) m.optimizer = 0;   // page rounding of the disk slots
  m.activations = static_cast<double>(model_activation_bytes(cfg.model, cfg.train.micro_batch, cfg.train.recompute(), cfg.runtime.precision));
  const RefreshWork work = refresh_work(cfg, tables);
  m.refresh_work = work.in_memory;
  m.jobs_on_disk = work.on_disk;
  // runtime.backend cuda: gradients, activations and the device tier's optimizer state live in
  // device memory; the host holds the parameters as the run's image (train/device_training.hpp)
  // and the host tier's homes (pinned).
  // A sharded rank's image is its shards, and one whole-layer buffer it initializes them in.
  if (cfg.runtime.backend == BackendKind::Cuda) {
    m.grads = m.activations = 0;
    m.optimizer = 0;
    const std::optional<ShardedDeviceRank> rank = sharded_device_rank(cfg, tier_check);
    const TierLayout host_layout = rank ? configured_tier_layout(cfg, rank->tables, tier_check) : layout;
    for (const auto& by_tier : host_layout.by_class) m.optimizer += static_cast<double>(by_tier[static_cast<int>(Tier::Host)]);
    if (rank) {
      m.params = static_cast<double>((rank->figures.shard_floats + rank->largest_layer) * sizeof(float));
      const RefreshWork own = refresh_work(cfg, rank->tables);   // it refreshes its own blocks
      m.refresh_work = own.in_memory;
      m.jobs_on_disk = own.on_disk;
    }
  }
  return m;
}

MemoryEstimate device_memory(const Config& cfg, TierCheck tier_check) {
  MemoryEstimate m;
  if (const std::optional<ShardedDeviceRank> rank = sharded_device_rank(cfg, tier_check)) {
    // Its shards and the whole layers in flight (fsdp/device_shards.hpp), the receive buffer
    // counted with the gradients, its optimizer state's device tier.
    const RankFigures& f = rank->figures;
    m.params = static_cast<double>(f.param_bytes);
    m.grads = static_cast<double>(f.grad_bytes + f.comm_buffer_bytes);
    const TierLayout layout = configured_tier_layout(cfg, rank->tables, tier_check);
    m.optimizer = static_cast<double>(layout.device_home_bytes + layout.device_cache_bytes);
    m.activations = static_cast<double>(f.activation_bytes);
    return m;
  }
  m.params = m.grads = static_cast<double>(count_params(cfg.model).total) * sizeof(float);
  // and the GEMMs' bf16 copy of the weights (model.hpp)
  if (cfg.runtime.precision == ComputePrecision::Bf16) m.params += static_cast<double>(model_bf16_weight_copy_bytes(cfg.model));
  const TierLayout layout = configured_tier_layout(cfg, tier_check);
  m.optimizer = static_cast<double>(layout.device_home_bytes + layout.device_cache_bytes);
  m.activations = static_cast<double>(model_activation_bytes(cfg.model, cfg.train.micro_batch, cfg.train.recompute(), cfg.runtime.precision));
  return m;
}

void check_device_memory(const Config& cfg, const MemoryEstimate& need, uint64_t free_bytes, const std::string& device) {
  if (need.total() <= static_cast<double>(free_bytes)) return;
  fail(cfg.source, ": this run needs about ", human_bytes(need.total()), " of memory on ", device, " (params ",
       human_bytes(need.params), ", grads ", human_bytes(need.grads), ", the device tier's optimizer state ",
       human_bytes(need.optimizer), ", activations ", human_bytes(need.activations), ") but it has ",
       human_bytes(static_cast<double>(free_bytes)),
       " free. Lower runtime.tiers.device.bytes (the rest of the optimizer state then lives in pinned host memory or "
       "on the disk tier), lower train.micro_batch (raising train.grad_accum keeps the batch), or turn on "
       "train.activation_recompute; `--dry-run` shows the estimate");
}

MemoryEstimate rank_memory(const Config& cfg, int world, int ranks_per_node, TierCheck tier_check) {
  Config c = cfg;
  c.distributed.world_size = world;
  c.distributed.ranks_per_node = ranks_per_node;
  const WorldPlan plan = plan_world(c, tier_check);
  MemoryEstimate m;
  for (const RankFigures& r : plan.ranks) {
    if (static_cast<double>(r.total_bytes()) <= m.total()) continue;
    m.params = static_cast<double>(r.param_bytes);
    m.grads = static_cast<double>(r.grad_bytes);
    m.optimizer = std::max(0.0, static_cast<double>(r.optim.total() + r.tier_cache + r.comm_buffer_bytes) -
                                    static_cast<double>(r.optim_on_disk));
    m.optimizer_on_disk = static_cast<double>(r.optim_on_disk);
    m.activations = static_cast<double>(r.activation_bytes);
  }
  // Counted as the whole model's (a rank refreshes only its blocks: an upper bound).
  const RefreshWork work = refresh_work(c, plan.tables);
  m.refresh_work = work.in_memory;
  m.jobs_on_disk = work.on_disk;
  return m;
}

uint64_t available_memory_bytes() {
  const MemoryLimits limits = find_memory_limits();
  const MemorySource* b = limits.binding(1);
  return b ? b->bytes : 0;
}

uint64_t memory_limit_bytes(const Config& cfg, int ranks_on_machine) {
  if (!cfg.runtime.memory_limit_auto()) return parse_byte_size(cfg.runtime.memory_limit);
  const MemoryLimits limits = find_memory_limits();
  const MemorySource* b = limits.binding(ranks_on_machine);
  return b ? limits.per_process(*b, ranks_on_machine) : std::numeric_limits<uint64_t>::max();
}

std::string memory_limit_source(const Config& cfg, int ranks_on_machine) {
  if (!cfg.runtime.memory_limit_auto()) return "runtime.memory_limit " + cfg.runtime.memory_limit;
  const MemoryLimits limits = find_memory_limits();
  const MemorySource* b = limits.binding(ranks_on_machine);
  if (!b) return "runtime.memory_limit auto: no limit found";
  return "runtime.memory_limit auto: " + b->name + " (" + b->where + ")" +
         (b->shared && ranks_on_machine > 1 ? " over " + std::to_string(ranks_on_machine) + " ranks" : "");
}

void check_memory(const Config& cfg, const MemoryEstimate& need, int ranks_on_machine) {
  const uint64_t limit = memory_limit_bytes(cfg, ranks_on_machine);
  if (limit == std::numeric_limits<uint64_t>::max() || need.total() <= static_cast<double>(limit)) return;
  std::ostringstream os;
  os << cfg.source << ": this run needs about " << human_bytes(need.total()) << " of memory per process (params "
     << human_bytes(need.params) << ", grads " << human_bytes(need.grads) << ", optimizer state in memory "
     << human_bytes(need.optimizer) << ", activations " << human_bytes(need.activations);
  if (need.refresh_work > 0) os << ", refresh buffers " << human_bytes(need.refresh_work);
  os << ") but may use " << human_bytes(static_cast<double>(limit)) << " (" << memory_limit_source(cfg, ranks_on_machine)
     << "). Let runtime.placement auto (the default) place it, put optimizer state on the disk tier "
        "(runtime.tiers budgets), lower train.micro_batch, or shard it over more ranks; `--dry-run` shows the estimate";
  fail(os.str());
}

}  // namespace asteria
