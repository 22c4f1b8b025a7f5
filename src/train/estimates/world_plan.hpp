#pragma once
// Planning a launch of distributed.world_size ranks without MPI and without allocating the model
// (--dry-run, --print-plan): the shard map of every layer and each rank's memory and comm bytes,
// computed with the trainer's own pieces (shard_layer, shard_table, optimizer_state_bytes) and
// counted as Sharding does (fsdp/sharding.hpp), so the figures are what a real run of W ranks
// holds and reports in metrics.jsonl's comm_bytes.
#include <cstddef>
#include <string>
#include <vector>

#include "fsdp/shard_layout.hpp"
#include "fsdp/sharding.hpp"
#include "model/param_table.hpp"
#include "runtime/plan.hpp"
#include "config/config.hpp"
#include "optim/optimizer_factory.hpp"
#include "train/tier_config.hpp"

namespace asteria {

// The groups of a launch of W ranks (docs/DESIGN.md "FSDP"; ranks numbered node by node):
//   full    one shard group of W ranks, no replicas;
//   hybrid  a shard group per node (ranks_per_node ranks), W / ranks_per_node replicas;
//   none    shard groups of one rank, W replicas.
struct PlannedWorld {
  FsdpMode mode = FsdpMode::Full;  // distributed.fsdp
  int world = 1;
  int ranks_per_node = 0;  // distributed.ranks_per_node (0: not set)
  int group = 1;           // ranks of a shard group
  int replicas = 1;        // ranks of a replica group
  bool sharded() const { return group > 1; }    // gathers and reduce-scatters
  bool reduces() const { return world > 1; }    // any gradient collective
  // World rank r's rank in its shard group.
  int group_rank(int r) const { return mode == FsdpMode::Hybrid ? r % group : mode == FsdpMode::Full ? r : 0; }
};

// The world of distributed.world_size (> 0); an Error naming the keys when it is not a launch
// (hybrid needs distributed.ranks_per_node: planning has no MPI to ask).
PlannedWorld planned_world(const Config& cfg);

// One rank's figures. Ranks with the same shard-group rank (hybrid: local rank) are alike.
struct RankFigures {
  int group_rank = 0;
  int units = 0;                 // units owned, over all layers
  size_t shard_floats = 0;       // parameters owned (stepped by this rank), over all layers
  size_t param_bytes = 0;        // the parameters it holds: sharded, its shards and the gathered
                                 // whole-layer buffers in flight; else every layer whole
  size_t grad_bytes = 0;         // the same for the gradients
  OptimizerStateBytes optim;     // its optimizer's state (built on its shard tables)
  size_t optim_on_disk = 0;      // of which the tiers home on the disk tier (runtime.tiers)
  size_t tier_cache = 0;         // and the device tier's cache for the states that visit
  size_t comm_buffer_bytes = 0;  // Sharding's receive buffer (its largest shard of a layer)
  size_t activation_bytes = 0;
  CommBytes comm;                // moved per step, at least, as Sharding::take_bytes counts it
  size_t total_bytes() const {
    return param_bytes + grad_bytes + optim.total() + tier_cache - optim_on_disk + comm_buffer_bytes + activation_bytes;
  }
};

struct WorldPlan {
  PlannedWorld world;
  std::vector<std::string> layer_names;
  std::vector<ParamTable> tables;        // the whole layers
  std::vector<LayerShards> shards;       // per layer, over the shard group (layers over 2^31 - 1
                                         // floats are refused, as Sharding refuses them)
  std::vector<RankFigures> ranks;        // per shard-group rank
  OptimizerStateBytes one_rank_optim;    // the unsharded optimizer state (one process)
  // Sharded: the whole-layer buffers in flight (sharding_plan_ops.hpp), each largest_layer floats.
  int micro_batches = 1, prefetch = 1, param_buffers = 0, grad_buffers = 0;
  size_t largest_layer = 0;
};

// Needs distributed.world_size > 0. Allocates nothing model-sized.
WorldPlan plan_world(const Config& cfg, TierCheck tiers = TierCheck::Planned);

// The coherence protocol of the planned launch (runtime/coherence.hpp): active in asteria mode
// with a second-order optimizer and replicas of the optimizer state (fsdp none, or hybrid over
// several nodes). Owners as the run assigns them, in every replica group (one per shard-group
// rank); the bytes every rank sends in a refresh period (optim.precondition_frequency steps:
// each block refreshes once) when every version ships (staleness 1), with either scheme.
struct CoherencePlan {
  bool active = false;
  int replicas = 1;              // per replica group
  int groups = 0;                // replica groups (the shard group's ranks)
  int nodes = 1;                 // that the replicas of a group span
  int64_t blocks = 0;            // over all groups
  int64_t blocks_min = 0, blocks_max = 0;   // per replica
  double cost_min = 0, cost_max = 0;        // a replica's refresh cost / an even share of its group's
  int64_t period = 0;            // steps
  size_t hier_inter = 0, hier_intra = 0, flat_inter = 0, flat_intra = 0;
};
CoherencePlan plan_coherence(const Config& cfg, const WorldPlan& plan);

// "16.78M floats", "49.2K floats", "1 floats": a float count as the reports print it.
std::string floats_text(double n);

// --print-plan's detail of a gather, reduce_scatter or all_reduce op ("" for any other kind): the
// group it runs in and the floats it exchanges (the replicas' all-reduce of a reduce-scatter's
// shard follows the last micro-batch's only).
std::string comm_op_detail(const WorldPlan& plan, const Op& op, int micro_batches);

}  // namespace asteria
