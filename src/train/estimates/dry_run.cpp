#include "train/estimates/dry_run.hpp"

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <sstream>

#include "core/cpu/blas_kernels.hpp"
#include "core/cpu/gemm_routing.hpp"
#include "core/backend.hpp"
#include "core/memory_limits.hpp"

#include "model/model.hpp"
#include "train/estimates/flops.hpp"
#include "train/estimates/memory_estimate.hpp"
#include "optim/optimizer_factory.hpp"
#include "train/tier_config.hpp"
#include "train/estimates/placement.hpp"
#include "train/estimates/world_plan.hpp"

namespace asteria {

namespace {

// What the activation figure depends on besides the model: "micro-batch 1 x seq 2048,
// recompute blocks, attention tiled, head chunk 512, stored as bf16".
std::string activation_mode(const Config& cfg) {
  std::string s = "micro-batch " + std::to_string(cfg.train.micro_batch) + " x seq " +
                  std::to_string(cfg.model.seq_len) + ", recompute " +
                  to_string(cfg.train.activation_recompute);
  if (cfg.train.activation_recompute == ActivationRecompute::Mode::EveryK)
    s += " (k = " + std::to_string(cfg.train.recompute_every_k) + ")";
  s += std::string(", attention ") + to_string(cfg.model.attention);
  if (cfg.model.head_chunk > 0) s += ", head chunk " + std::to_string(cfg.model.head_chunk);
  if (cfg.runtime.precision == ComputePrecision::Bf16) s += ", stored as bf16";
  return s;
}

std::string human_count(double n) {
  char buf[32];
  if (n >= 1e9) std::snprintf(buf, sizeof buf, "%.3fB", n / 1e9);
  else if (n >= 1e6) std::snprintf(buf, sizeof buf, "%.3fM", n / 1e6);
  else std::snprintf(buf, sizeof buf, "%.0f", n);
  return buf;
}

// "0-3,5,7-9": a sorted list of ranks as ranges, cut after about 100 characters ("...").
std::string rank_ranges(const std::vector<int>& ranks) {
  std::string out;
  for (size_t i = 0; i < ranks.size();) {
    if (out.size() > 100) return out + ",...";
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(ranks[i]);
    if (j > i) {
      out += '-';
      out += std::to_string(ranks[j]);
    }
    i = j + 1;
  }
  return out;
}

std::string short_name(const std::string& name) {
  const size_t dot = name.rfind('.');
  return dot == std::string::npos ? name : name.substr(dot + 1);
}

// What a rank's shard table holds: "att_qkv rows 4096-6143, att_out, mlp_up rows 0-2047".
std::string owned_text(const ParamTable& mine) {
  struct Piece {
    std::string name;
    int64_t row0, rows, tensor_rows;
  };
  std::vector<Piece> pieces;
  for (const ParamEntry& e : mine.entries) {
    const int64_t rows = e.shape.size() == 2 ? e.shape[0] : 0;
    const int64_t tensor_rows = e.tensor_rows > 0 ? e.tensor_rows : rows;
    if (!pieces.empty() && pieces.back().name == e.name && pieces.back().row0 + pieces.back().rows == e.row_offset)
      pieces.back().rows += rows;
    else
      pieces.push_back({e.name, e.row_offset, rows, tensor_rows});
  }
  std::string out;
  for (const Piece& p : pieces) {
    out += (out.empty() ? "" : ", ") + short_name(p.name);
    if (p.rows < p.tensor_rows)
      out += " rows " + std::to_string(p.row0) + "-" + std::to_string(p.row0 + p.rows - 1);
  }
  return out;
}

// Groups of more ranks than this are summarized per layer (ranks by unit count), not listed.
constexpr int kListRanks = 16;

// One layer's shard map by range (ranges in buffer order; rank (k + shift) mod G owns range k),
// without its name: layers alike print one map.
std::string layer_map(const Config& cfg, const WorldPlan& plan, int l) {
  const ParamTable& t = plan.tables[l];
  LayerShards s = plan.shards[l];
  s.shift = 0;   // rank g below is range g
  const int G = plan.world.group;
  std::ostringstream os;
  if (t.numel == 0) {
    os << ": no parameters (its collectives move nothing; every rank still joins them)\n";
    return os.str();
  }
  std::vector<ParamTable> mine;
  size_t units = 0;
  for (int g = 0; g < G; ++g) {
    mine.push_back(shard_table(t, s, g, shard_unit_rows(cfg.optim)));
    units += mine.back().entries.size();
  }
  size_t largest = 0;
  for (int g = 0; g < G; ++g) largest = std::max(largest, s.count(g));
  char even[32];
  std::snprintf(even, sizeof even, "%.2f", static_cast<double>(largest) * G / static_cast<double>(t.numel));
  os << ": " << floats_text(static_cast<double>(t.numel)) << ", " << units << " units; largest shard "
     << floats_text(static_cast<double>(largest)) << " (" << even << " x an even 1/" << G << ")\n";
  if (G <= kListRanks) {
    for (int g = 0; g < G; ++g) {
      os << "  range " << g << ": ";
      if (s.count(g) == 0) {
        os << "no unit\n";
        continue;
      }
      os << mine[g].entries.size() << (mine[g].entries.size() == 1 ? " unit, " : " units, ")
         << floats_text(static_cast<double>(s.count(g))) << ": " << owned_text(mine[g]) << "\n";
    }
    return os.str();
  }
  // Ranges by the number of units they hold, most first.
  std::map<size_t, std::vector<int>, std::greater<>> by_units;
  for (int g = 0; g < G; ++g) by_units[mine[g].entries.size()].push_back(g);
  for (const auto& [n, ranks] : by_units) {
    if (n == 0) {
      os << "  no unit: " << ranks.size() << " ranges (" << rank_ranges(ranks) << "; their ranks join every collective)\n";
      continue;
    }
    size_t lo = SIZE_MAX, hi = 0;
    for (int g : ranks) {
      lo = std::min(lo, s.count(g));
      hi = std::max(hi, s.count(g));
    }
    // "4.19M - 16.78M floats", or one figure when they print alike.
    std::string a = floats_text(static_cast<double>(lo));
    const std::string b = floats_text(static_cast<double>(hi));
    if (a != b) a = a.substr(0, a.find(' ')) + " - " + b;
    os << "  " << n << (n == 1 ? " unit, " : " units, ") << a << ": " << ranks.size() << " ranges ("
       << rank_ranges(ranks) << ")\n";
  }
  return os.str();
}

// The min and max over the ranks of a figure, with the ranks that have them.
// exact: each figure also in bytes ("1.00 MiB = 1048584 B"), to compare with metrics.jsonl.
template <class F>
std::string min_max(const WorldPlan& plan, F figure, bool exact = false) {
  size_t lo = 0, hi = 0;
  for (size_t g = 1; g < plan.ranks.size(); ++g) {
    if (figure(plan.ranks[g]) < figure(plan.ranks[lo])) lo = g;
    if (figure(plan.ranks[g]) > figure(plan.ranks[hi])) hi = g;
  }
  const auto text = [&](size_t g) {
    const size_t b = figure(plan.ranks[g]);
    return human_bytes(static_cast<double>(b)) + (exact ? " = " + std::to_string(b) + " B" : std::string());
  };
  if (figure(plan.ranks[lo]) == figure(plan.ranks[hi])) return text(lo) + " on every rank";
  return "min " + text(lo) + " (rank " + std::to_string(lo) + "), max " + text(hi) + " (rank " + std::to_string(hi) + ")";
}

// The shard map: who owns which part of each layer.
void shard_map_section(std::ostream& os, const Config& cfg, const WorldPlan& plan) {
  const PlannedWorld& w = plan.world;
  os << "# shard map (distributed.world_size " << w.world << ", distributed.fsdp " << to_string(w.mode) << ": ";
  if (w.mode == FsdpMode::Full) os << "one shard group of " << w.group << " ranks, no replicas)\n";
  else if (w.mode == FsdpMode::Hybrid)
    os << w.replicas << " node(s) of " << w.group << " ranks: a shard group per node, replicated across nodes; "
       << "rank below = local rank, alike on every node)\n";
  else os << w.replicas << " replicas of the whole model)\n";
  if (!w.sharded()) {
    os << "nothing is sharded: every rank holds and steps every layer whole\n\n";
  } else {
    const int64_t unit = shard_unit_rows(cfg.optim);
    if (unit < (int64_t{1} << 31))
      os << "unit: a row-block of a matrix (at most " << unit << " rows, all columns) or a 1-D tensor; a rank owns whole "
         << "units and steps them\n";
    else
      os << "unit: a whole tensor (" << to_string(cfg.optim.name) << " steps each matrix whole); a rank owns whole units "
         << "and steps them\n";
    // Consecutive layers with the same map (blocks.0 .. blocks.N-1) print it once.
    const int L = static_cast<int>(plan.tables.size());
    for (int l = 0; l < L;) {
      const std::string map = layer_map(cfg, plan, l);
      int last = l;
      while (last + 1 < L && layer_map(cfg, plan, last + 1) == map) ++last;
      os << plan.layer_names[l];
      if (last > l) os << " .. " << plan.layer_names[last] << " (" << last - l + 1 << " layers, each)";
      os << map;
      // Who owns the ranges: each layer's shift (shard_model), one figure per layer of the group.
      if (plan.tables[l].numel > 0 && w.group <= kListRanks) {
        os << "  owners: rank (range + shift) mod " << w.group << ", shift";
        for (int k = l; k <= last; ++k) os << " " << plan.shards[k].shift;
        os << "\n";
      }
      l = last + 1;
    }
    os << "\n";
  }
}

// Each rank's memory: parameters, gradients, optimizer state, buffers, activations.
void memory_section(std::ostream& os, const Config& cfg, const WorldPlan& plan) {
  const PlannedWorld& w = plan.world;
  const RankFigures& r0 = plan.ranks[0];
  os << "# per-rank memory (fp32, world " << w.world << "; min / max over the ranks)\n";
  size_t shard_lo = SIZE_MAX, shard_hi = 0;
  for (const RankFigures& f : plan.ranks) {
    shard_lo = std::min(shard_lo, f.shard_floats);
    shard_hi = std::max(shard_hi, f.shard_floats);
  }
  if (w.sharded()) {
    const std::string shard = human_bytes(shard_lo * 4.0) + (shard_hi != shard_lo ? " - " + human_bytes(shard_hi * 4.0) : "");
    os << "params:           " << min_max(plan, [](const RankFigures& f) { return f.param_bytes; }) << "  (its shard "
       << shard << ", and " << plan.param_buffers
       << " whole-layer buffers for the gathered layers in flight, distributed.prefetch " << cfg.distributed.prefetch << ")\n"
       << "grads:            " << min_max(plan, [](const RankFigures& f) { return f.grad_bytes; }) << "  (its shard "
       << shard << ", and " << plan.grad_buffers << " whole-layer buffers until their reduce-scatter)\n";
  } else {
    os << "params:           " << human_bytes(static_cast<double>(r0.param_bytes)) << "  (every rank: every layer whole)\n"
       << "grads:            " << human_bytes(static_cast<double>(r0.grad_bytes)) << "  (every rank: every layer whole)\n";
  }
  os << "optimizer state:  " << min_max(plan, [](const RankFigures& f) { return f.optim.total(); }) << "  ("
     << to_string(cfg.optim.name) << (w.sharded() ? ", on each rank's shard tables" : ", whole") << ")\n";
  if (w.sharded()) {
    size_t sum = 0;
    int64_t blocks = 0;
    for (const RankFigures& f : plan.ranks) {
      sum += f.optim.total();
      blocks += f.optim.blocks;
    }
    os << "  over a shard group: " << human_bytes(static_cast<double>(sum)) << " = one process's "
       << human_bytes(static_cast<double>(plan.one_rank_optim.total()));
    const bool blocked = describe(cfg.optim.name).refreshes;
    if (blocked) os << "; " << blocks << " blocks = " << plan.one_rank_optim.blocks;
    os << "\n";
    if (blocked) {
      int64_t lo = INT64_MAX, hi = 0;
      for (const RankFigures& f : plan.ranks) {
        lo = std::min(lo, f.optim.blocks);
        hi = std::max(hi, f.optim.blocks);
      }
      os << "  blocks per rank: " << lo << " - " << hi << "\n";
    }
    std::vector<int> idle;
    for (const RankFigures& f : plan.ranks)
      if (f.units == 0) idle.push_back(f.group_rank);
    if (!idle.empty())
      os << "  ranks owning no unit of any layer: " << idle.size() << " (" << rank_ranges(idle)
         << "; no optimizer state, they step nothing)\n";
  }
  os << "comm buffers:     "
     << (w.sharded() ? min_max(plan, [](const RankFigures& f) { return f.comm_buffer_bytes; }) +
                           "  (the reduce-scatter's receive buffer: the rank's largest shard of a layer)"
                     : std::string("none  (the all-reduce runs in place)"))
     << "\n"
     << "activations:      " << human_bytes(static_cast<double>(r0.activation_bytes)) << "  ("
     << activation_mode(cfg) << ")\n"
     << "total (peak):     " << min_max(plan, [](const RankFigures& f) { return f.total_bytes(); }) << "\n";
  if (cfg.runtime.backend == BackendKind::Cuda) {
    // Where it lives on the GPU: the device memory the largest rank needs (its startup check).
    const MemoryEstimate dev = device_memory(cfg), host = process_memory(cfg);
    os << "on each GPU:      " << human_bytes(dev.total()) << "  (runtime.backend cuda, the largest rank: params "
       << human_bytes(dev.params) << ", grads and receive buffer " << human_bytes(dev.grads)
       << ", the device tier's optimizer state " << human_bytes(dev.optimizer) << ", activations "
       << human_bytes(dev.activations) << ")\n"
       << "in host memory:   " << human_bytes(host.total()) << "  (per rank: the image of its "
       << (w.sharded() ? "shards" : "parameters") << ", the host tier's optimizer state, refresh buffers)\n";
  }
  os << "\n";
}

// The bytes each rank moves per step, per group.
void comm_section(std::ostream& os, const WorldPlan& plan) {
  const PlannedWorld& w = plan.world;
  os << "# comm per step, per rank (the data it moves at least, as metrics.jsonl comm_bytes counts it)\n";
  if (!w.reduces()) {
    os << "none (one rank)\n";
    return;
  }
  const std::string inside = w.mode == FsdpMode::Hybrid ? ", inside a node" : "";
  const std::string across = w.mode == FsdpMode::Hybrid ? ", across nodes" : "";
  if (w.sharded())
    os << "shard group (" << w.group << " ranks" << inside << "): gather + reduce_scatter "
       << min_max(plan, [](const RankFigures& f) { return f.comm.group; }, true)
       << "  (per micro-batch and layer, each way: the other ranks' parts, the layer less the rank's own shard; "
          "gathered for the forward and again for the backward unless kept)\n";
  if (w.replicas > 1)
    os << "replica group (" << w.replicas << " ranks" << across << "): all_reduce "
       << min_max(plan, [](const RankFigures& f) { return f.comm.replicas; }, true)
       << "  (2 (n-1)/n x " << (w.sharded() ? "the rank's shard" : "every layer") << ")\n";
  os << "total:            " << min_max(plan, [](const RankFigures& f) { return f.comm.group + f.comm.replicas; }, true)
     << "  (plus the all-reduces of a few scalars: grad norm, loss)\n";
}

// The limits the process must live within: every source found, the one that binds, and the free
// space of the disk tier's file system.
void limits_section(std::ostream& os, const Config& cfg, const MemoryEstimate& mem) {
  const uint64_t limit = memory_limit_bytes(cfg, 1);
  os << "memory limit:     " << (limit == UINT64_MAX ? std::string("none") : human_bytes(static_cast<double>(limit)))
     << "  (" << memory_limit_source(cfg, 1) << "; a run above it is refused at startup)\n";
  const MemoryLimits limits = find_memory_limits();
  const MemorySource* binds = limits.binding(1);
  for (const MemorySource& src : limits.sources)
    os << "  " << src.name << std::string(src.name.size() < 14 ? 14 - src.name.size() : 1, ' ')
       << human_bytes(static_cast<double>(src.bytes)) << "  (" << src.where << (src.shared ? "" : ", per process")
       << (&src == binds && cfg.runtime.memory_limit_auto() ? "; binds" : "") << ")\n";
  // On the GPU the device tier, the parameters and the activations live in device memory.
  if (cfg.runtime.backend == BackendKind::Cuda) {
    DeviceMemory dev;
    std::string why;
    if (cuda_device_memory(0, &dev, &why))
      os << "  CUDA device 0  " << human_bytes(static_cast<double>(dev.free)) << " free of "
         << human_bytes(static_cast<double>(dev.total)) << "  (cudaMemGetInfo; device memory, beside these host limits)\n";
    else
      os << "  CUDA device 0  unknown  (" << why << ")\n";
  }
  const std::string disk = disk_tier_file(cfg);
  const std::string dir = std::filesystem::path(disk).parent_path().string();
  const std::optional<uint64_t> free = free_disk_bytes(dir);
  os << "disk tier:        " << (free ? human_bytes(static_cast<double>(*free)) + " free" : std::string("free space unknown"))
     << " at " << dir << " (statvfs); optimizer state homed there: " << human_bytes(mem.optimizer_on_disk);
  if (mem.jobs_on_disk > 0) os << "; refreshes in flight parked there at most: " << human_bytes(mem.jobs_on_disk);
  if (mem.params_on_disk > 0) os << "; the blocks' parameters there: " << human_bytes(mem.params_on_disk);
  os << "\n\n";
}

std::string world_report(const Config& cfg) {
  const WorldPlan plan = plan_world(cfg);
  const PlannedWorld& w = plan.world;
  std::ostringstream os;
  const int64_t instances = static_cast<int64_t>(w.world) * cfg.train.micro_batch * cfg.train.grad_accum;
  os << "# world of " << w.world << " ranks: global batch " << w.world << " x " << cfg.train.micro_batch << " x "
     << cfg.train.grad_accum << " = " << instances << " instances, " << instances * cfg.model.seq_len
     << " tokens per step\n\n";
  shard_map_section(os, cfg, plan);
  memory_section(os, cfg, plan);
  comm_section(os, plan);
  return os.str();
}

}  // namespace

// The coherence protocol of the planned launch (empty when it is not active).
std::string coherence_report(const Config& cfg) {
  const WorldPlan plan = plan_world(cfg);
  const CoherencePlan c = plan_coherence(cfg, plan);
  if (!c.active) return "";
  const CoherenceConfig& cc = cfg.runtime.coherence;
  std::ostringstream os;
  char share[64];
  std::snprintf(share, sizeof share, "%.2f - %.2f", c.cost_min, c.cost_max);
  os << "\n# coherence (runtime.mode asteria, replicated optimizer state; runtime.coherence staleness " << cc.staleness
     << ", tolerance " << (cc.tolerance > 0 ? std::to_string(cc.tolerance) : std::string("off")) << ", "
     << (cc.hierarchical ? "hierarchical" : "flat") << ")\n"
     << "replica groups: " << c.groups << " of " << c.replicas << " replicas over " << c.nodes << " node(s)"
     << (plan.world.mode == FsdpMode::Hybrid ? " (hybrid: one replica per node)" : "") << "\n"
     << "owners: " << c.blocks << " blocks, one owner each; per replica " << c.blocks_min << " - " << c.blocks_max
     << " blocks, refresh cost (rows^3 + cols^3) " << share << " x an even 1/" << c.replicas << "\n"
     << "per refresh period (optim.precondition_frequency " << c.period
     << " steps) at staleness 1, every rank's sends summed:\n"
     << "  hierarchical: between nodes " << human_bytes(static_cast<double>(c.hier_inter)) << ", inside nodes "
     << human_bytes(static_cast<double>(c.hier_intra)) << "\n"
     << "  flat:         between nodes " << human_bytes(static_cast<double>(c.flat_inter)) << ", inside nodes "
     << human_bytes(static_cast<double>(c.flat_intra)) << "\n"
     << "  (staleness S ships about 1 / S of it; the tolerance ships more when versions change fast)\n";
  return os.str();
}

namespace {

// The CPU and the BLAS kernels this process runs (after runtime.blas's switch, if any).
void cpu_section(std::ostream& os, const Config& cfg) {
  const nlohmann::json b = blas_report();
  os << "# cpu and BLAS kernels\n"
     << "cpu:          " << b["cpu"].get<std::string>() << " (" << b["cpu_vendor"].get<std::string>() << " family/model "
     << b["cpu_family_model"].get<std::string>() << ": " << b["cpu_features"].get<std::string>() << ")\n"
     << "kernels:      OpenBLAS " << b["openblas_corename"].get<std::string>() << " (best for this CPU: "
     << (b["cpu_best_kernels"].get<std::string>().empty() ? "none known" : b["cpu_best_kernels"].get<std::string>())
     << "; OPENBLAS_CORETYPE " << b["openblas_coretype_env"].get<std::string>() << "; runtime.blas " << to_string(cfg.runtime.blas)
     << ")\n";
  const nlohmann::json g = gemm_report(routing_for(cfg.runtime.gemm));
  os << "gemm:         fp32 " << g["fp32"].get<std::string>() << "; bf16 " << g["bf16"].get<std::string>() << " (oneDNN "
     << g["onednn"].get<std::string>() << ", " << g["onednn_isa"].get<std::string>() << " kernels; runtime.gemm "
     << g["setting"].get<std::string>() << ")\n\n";
}

}  // namespace

std::string dry_run_report(const Config& given) {
  check_supported(given);
  // What the run would use: the config as runtime.placement fits it to this machine.
  // A run that cannot fit is still described, as given, after the reason.
  Placement placed;
  std::string refused;
  try {
    placed = place_for_planning(given);
  } catch (const Error& e) {
    placed.cfg = given;
    refused = e.what();
  }
  const Config& cfg = placed.cfg;
  std::ostringstream os;
  os << "# resolved config (" << cfg.source << ")\n" << config_to_yaml(cfg) << "\n";
  if (refused.empty())
    os << "# " << placed.describe() << "\n\n";
  else
    os << "# placement: refused at startup: " << refused << "\n\n";
  const ParamCounts pc = count_params(cfg.model);
  os << "# parameters\n"
     << "total:        " << pc.total << " (" << human_count(pc.total) << ")\n"
     << "embedding:    " << pc.embedding << "\n"
     << "matrices:     " << pc.matrices << "\n"
     << "norm weights: " << pc.norms << "\n\n";
  cpu_section(os, cfg);
  const double p = static_cast<double>(pc.total) * sizeof(float);
  const OptimizerStateBytes ob = optimizer_state_bytes(cfg.optim, model_param_tables(cfg.model));
  const double opt = static_cast<double>(ob.total());
  const double act = static_cast<double>(model_activation_bytes(cfg.model, cfg.train.micro_batch, cfg.train.recompute(), cfg.runtime.precision));
  os << "# memory estimate (fp32, one process)\n"
     << "params:           " << human_bytes(p) << "\n"
     << "grads:            " << human_bytes(p) << "\n"
     << "optimizer state:  " << human_bytes(opt) << "  (" << to_string(cfg.optim.name) << ")\n";
  const OptimizerDescription& od = describe(cfg.optim.name);
  if (od.refreshes)
    os << "  factors:        " << human_bytes(static_cast<double>(ob.factors)) << "  (" << ob.blocks
       << " blocks, max dim " << cfg.optim.max_preconditioner_dim << ")\n"
       << "  roots/bases:    " << human_bytes(static_cast<double>(ob.roots)) << "\n"
       << "  moments:        " << human_bytes(static_cast<double>(ob.moments)) << "\n";
  else if (ob.moments > 0)
    os << "  moments:        " << human_bytes(static_cast<double>(ob.moments)) << "\n";
  os << "  adamw moments:  " << human_bytes(static_cast<double>(ob.adamw)) << "  (" << od.adamw_covers << ")\n";
  if (ob.compensation > 0)
    os << "  compensation:   " << human_bytes(static_cast<double>(ob.compensation))
       << "  (optim.compensated_updates: one float per parameter)\n";
  os
     << "activations:      " << human_bytes(act) << "  (" << activation_mode(cfg) << ")\n"
     << "total:            " << human_bytes(2 * p + opt + act) << "\n";
  // What the process holds with the tiers' placement, and what the startup check compares it with.
  const MemoryEstimate mem = process_memory(cfg);
  if (cfg.runtime.backend == BackendKind::Cuda)
    os << "on the device:    " << human_bytes(device_memory(cfg).total())
       << "  (runtime.backend cuda: parameters, gradients, the device tier's optimizer state, activations)\n"
       << "in host memory:   " << human_bytes(mem.total())
       << "  (the parameters' image checkpoints are written from, the host tier's optimizer state (pinned), refresh buffers)\n";
  else
    os << "in memory:        " << human_bytes(mem.total()) << "  (optimizer state on the disk tier: "
       << human_bytes(mem.optimizer_on_disk) << "; refresh buffers: " << human_bytes(mem.refresh_work) << ")\n";
  if (mem.params_on_disk > 0)
    os << "  params:         " << human_bytes(mem.params) << " in memory  (runtime.tiers.params.home disk: the blocks' "
       << human_bytes(mem.params_on_disk) << " on the disk tier, " << params_buffers(cfg) << " in flight; embedding, head)\n";
  limits_section(os, cfg, mem);
  os << "# " << configured_tier_layout(cfg).describe() << "\n";
  const double fpt = training_flops_per_token(cfg.model);
  const double tokens_per_step =
      static_cast<double>(cfg.train.micro_batch) * cfg.train.grad_accum * cfg.model.seq_len;
  os << "# compute\n"
     << "training FLOPs per token: " << fpt << "  (" << training_flops_formula() << ")\n"
     << "tokens per step:          " << tokens_per_step << "\n"
     << "training FLOPs per step:  " << fpt * tokens_per_step << "\n";
  if (cfg.distributed.world_size > 0) os << "\n" << world_report(cfg) << coherence_report(cfg);
  return os.str();
}

}  // namespace asteria
