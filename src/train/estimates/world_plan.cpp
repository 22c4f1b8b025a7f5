#include "train/estimates/world_plan.hpp"

#include <algorithm>
#include <climits>
#include <cstdio>

#include "core/error.hpp"
#include "fsdp/sharding_plan_ops.hpp"
#include "model/model.hpp"
#include "optim/blocks.hpp"
#include "runtime/coherence.hpp"
#include "train/tier_config.hpp"

namespace asteria {

PlannedWorld planned_world(const Config& cfg) {
  const DistributedConfig& d = cfg.distributed;
  ASTERIA_CHECK(d.world_size > 0, cfg.source, ": planning a multi-rank launch needs distributed.world_size > 0");
  PlannedWorld w;
  w.mode = d.fsdp;
  w.world = d.world_size;
  w.ranks_per_node = d.ranks_per_node;
  // Also refused when the config is loaded; a Config built in code may skip that.
  ASTERIA_CHECK(d.ranks_per_node == 0 || d.world_size % d.ranks_per_node == 0, cfg.source,
                ": distributed.world_size (", d.world_size, ") must be a whole number of nodes of "
                "distributed.ranks_per_node (", d.ranks_per_node, ") ranks");
  if (w.mode == FsdpMode::Full) {
    w.group = w.world;
    w.replicas = 1;
  } else if (w.mode == FsdpMode::Hybrid) {
    ASTERIA_CHECK(d.ranks_per_node > 0, cfg.source, ": distributed.fsdp hybrid with distributed.world_size ",
                  d.world_size, " needs distributed.ranks_per_node (the size of a node's shard group; "
                  "planning has no MPI to ask)");
    w.group = d.ranks_per_node;
    w.replicas = w.world / d.ranks_per_node;
  } else {  // None
    w.group = 1;
    w.replicas = w.world;
  }
  return w;
}

WorldPlan plan_world(const Config& cfg, TierCheck tier_check) {
  WorldPlan p;
  p.world = planned_world(cfg);
  p.tables = model_param_tables(cfg.model);
  p.layer_names = model_layer_names(cfg.model);
  const int64_t max_dim = shard_unit_rows(cfg.optim);
  const int G = p.world.group, R = p.world.replicas;
  size_t numel = 0;
  for (size_t l = 0; l < p.tables.size(); ++l) {
    const ParamTable& t = p.tables[l];
    // What Sharding refuses, planning refuses too.
    ASTERIA_CHECK(t.numel <= static_cast<size_t>(INT32_MAX), cfg.source, ": layer ", p.layer_names[l], " has ", t.numel,
                  " parameters, more than one MPI collective can address (2^31 - 1 floats)");
    numel += t.numel;
  }
  p.shards = shard_model(p.tables, max_dim, G);
  p.one_rank_optim = optimizer_state_bytes(cfg.optim, p.tables);
  const size_t activations = model_activation_bytes(cfg.model, cfg.train.micro_batch, cfg.train.recompute(), cfg.runtime.precision);
  const int L = static_cast<int>(p.tables.size()), micros = cfg.train.grad_accum;
  for (const ParamTable& t : p.tables) p.largest_layer = std::max(p.largest_layer, t.numel);
  p.micro_batches = micros;
  p.prefetch = cfg.distributed.prefetch;
  if (p.world.sharded()) {
    p.param_buffers = ShardingPlanOps::param_buffers(p.prefetch, L, cfg.model.tied_embeddings);
    p.grad_buffers = ShardingPlanOps::grad_buffers(cfg.model.tied_embeddings);
  }
  for (int g = 0; g < G; ++g) {
    RankFigures f;
    f.group_rank = g;
    std::vector<ParamTable> owned;
    size_t largest = 1;   // Sharding's receive buffer: this rank's largest part of a gradient
    for (size_t l = 0; l < p.tables.size(); ++l) {
      const LayerShards& s = p.shards[l];
      ParamTable mine = shard_table(p.tables[l], s, g, max_dim);
      f.units += static_cast<int>(mine.entries.size());
      f.shard_floats += s.count(g);
      largest = std::max(largest, s.count(g));
      // As Sharding: unsharded, the optimizer keeps whole tensors.
      owned.push_back(G > 1 ? std::move(mine) : p.tables[l]);
      // As Sharding::gather and reduce_scatter count them, per micro-batch: in the shard group
      // the other ranks' parts (they arrive for an all-gather, leave for the reduce-scatter),
      // for the forward's gather, the backward's (sharding_plan_ops.hpp) and the reduce-scatter.
      const int collectives = 2 + (ShardingPlanOps::gathered_for_backward(static_cast<int>(l), L, p.prefetch) ? 1 : 0);
      if (p.world.sharded()) f.comm.group += micros * collectives * (s.numel - s.count(g)) * sizeof(float);
      if (R > 1) f.comm.replicas += 2 * (R - 1) * s.count(g) * sizeof(float) / R;
    }
    if (p.world.sharded()) {
      // Its shards, and the whole-layer buffers in flight.
      f.param_bytes = (f.shard_floats + p.param_buffers * p.largest_layer) * sizeof(float);
      f.grad_bytes = (f.shard_floats + p.grad_buffers * p.largest_layer) * sizeof(float);
    } else {
      f.param_bytes = f.grad_bytes = numel * sizeof(float);
      // Whole layers owned: the GEMMs' bf16 copy of the weights too (model.hpp).
      if (cfg.runtime.precision == ComputePrecision::Bf16) f.param_bytes += model_bf16_weight_copy_bytes(cfg.model);
    }
    f.optim = optimizer_state_bytes(cfg.optim, owned);
    const TierLayout tiers = configured_tier_layout(cfg, owned, tier_check);
    for (const auto& by_tier : tiers.by_class) f.optim_on_disk += by_tier[static_cast<int>(Tier::Disk)];
    f.tier_cache = tiers.device_cache_bytes;
    f.comm_buffer_bytes = p.world.sharded() ? largest * sizeof(float) : 0;
    f.activation_bytes = activations;
    p.ranks.push_back(f);
  }
  return p;
}

CoherencePlan plan_coherence(const Config& cfg, const WorldPlan& plan) {
  CoherencePlan c;
  const PlannedWorld& w = plan.world;
  if (cfg.runtime.mode != RuntimeMode::Asteria || !describe(cfg.optim.name).refreshes || w.replicas < 2) return c;
  c.active = true;
  c.replicas = w.replicas;
  c.groups = w.group;
  c.period = cfg.optim.precondition_frequency;
  // The replicas' nodes: fsdp none, every rank (node = rank / ranks_per_node; unset: one node);
  // hybrid, one rank per node.
  std::vector<int> node_of;
  for (int r = 0; r < w.replicas; ++r)
    node_of.push_back(w.mode == FsdpMode::Hybrid ? r : (w.ranks_per_node > 0 ? r / w.ranks_per_node : 0));
  c.nodes = node_of.back() + 1;
  const int64_t max_dim = shard_unit_rows(cfg.optim);
  c.blocks_min = INT64_MAX;
  c.cost_min = 1e300;
  for (int g = 0; g < w.group; ++g) {
    std::vector<double> costs;
    std::vector<size_t> bytes;
    for (size_t l = 0; l < plan.tables.size(); ++l) {
      const ParamTable t = w.sharded() ? shard_table(plan.tables[l], plan.shards[l], g, max_dim) : plan.tables[l];
      for (const MatrixBlock& b : layer_blocks(static_cast<int>(l), t, max_dim, cfg.optim.precondition_embeddings)) {
        costs.push_back(static_cast<double>(b.rows) * b.rows * b.rows + static_cast<double>(b.cols) * b.cols * b.cols);
        bytes.push_back(Coherence::kControlBytes + Coherence::payload_bytes(cfg.optim.name, b.rows, b.cols));
      }
    }
    c.blocks += static_cast<int64_t>(costs.size());
    const std::vector<int> owner = assign_owners(costs, w.replicas);
    std::vector<int64_t> count(static_cast<size_t>(w.replicas), 0);
    std::vector<double> cost(static_cast<size_t>(w.replicas), 0.0);
    double group_cost = 0;
    for (size_t b = 0; b < costs.size(); ++b) {
      ++count[owner[b]];
      cost[owner[b]] += costs[b];
      group_cost += costs[b];
      for (bool hierarchical : {true, false})
        for (const VersionHop& h : version_hops(owner[b], node_of, hierarchical))
          (hierarchical ? (h.inter ? c.hier_inter : c.hier_intra) : (h.inter ? c.flat_inter : c.flat_intra)) += bytes[b];
    }
    for (int r = 0; r < w.replicas; ++r) {
      c.blocks_min = std::min(c.blocks_min, count[r]);
      c.blocks_max = std::max(c.blocks_max, count[r]);
      const double share = group_cost > 0 ? cost[r] * w.replicas / group_cost : 0;
      c.cost_min = std::min(c.cost_min, share);
      c.cost_max = std::max(c.cost_max, share);
    }
  }
  return c;
}

std::string floats_text(double n) {
  char buf[48];
  if (n >= 1e9) std::snprintf(buf, sizeof buf, "%.2fG floats", n / 1e9);
  else if (n >= 1e6) std::snprintf(buf, sizeof buf, "%.2fM floats", n / 1e6);
  else if (n >= 1e4) std::snprintf(buf, sizeof buf, "%.1fK floats", n / 1e3);
  else std::snprintf(buf, sizeof buf, "%.0f floats", n);
  return buf;
}

std::string comm_op_detail(const WorldPlan& plan, const Op& op, int micro_batches) {
  const int layer = op.layer;
  if (layer < 0 || layer >= static_cast<int>(plan.shards.size())) return "";
  const PlannedWorld& w = plan.world;
  const LayerShards& s = plan.shards[layer];
  size_t largest = 0;
  for (int r = 0; r < s.world(); ++r) largest = std::max(largest, s.count(r));
  const std::string parts = floats_text(static_cast<double>(s.numel)) + " in parts of their owners' size (largest " +
                            floats_text(static_cast<double>(largest)) + ")";
  switch (op.kind) {
    case OpKind::Gather:
      return "all-gather in the shard group of " + std::to_string(w.group) + ": " + parts;
    case OpKind::ReduceScatter:
      return "reduce-scatter in the shard group of " + std::to_string(w.group) + ": " + parts +
             (w.replicas > 1 && op.micro == micro_batches - 1 ? ", then all-reduce of each shard across " + std::to_string(w.replicas) + " replicas" : "");
    case OpKind::AllReduce:
      return "all-reduce across " + std::to_string(w.replicas) + " replicas: " + floats_text(static_cast<double>(s.numel));
    default:
      return "";
  }
}

}  // namespace asteria
