// Planning a launch of distributed.world_size ranks without MPI: --dry-run's shard map, per-rank
// memory and comm bytes (train/estimates/world_plan.hpp, train/estimates/dry_run.cpp), --print-plan's comm-lane ops
// (describe_step_plan), and a real one-rank run refusing a world_size it does not have.
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <set>
#include <sstream>

#include "core/error.hpp"
#include "model/model.hpp"
#include "config/config.hpp"
#include "train/estimates/dry_run.hpp"
#include "train/checkpoint/resume_check.hpp"
#include "train/plan_description.hpp"
#include "train/trainer.hpp"
#include "train/estimates/world_plan.hpp"

using namespace asteria;

namespace {

const std::string kConfigs = std::string(ASTERIA_SOURCE_DIR) + "/configs";

Config olmo_soap(std::vector<std::string> sets) {
  return load_config(kConfigs + "/olmo-1b-soap.yaml", sets);
}

template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

bool has(const std::string& text, const std::string& needle) { return text.find(needle) != std::string::npos; }

// The figures every sharded plan must satisfy, whatever W.
void expect_consistent(const WorldPlan& p) {
  const int G = p.world.group;
  ASSERT_EQ(static_cast<int>(p.ranks.size()), G);
  size_t numel = 0;
  for (const ParamTable& t : p.tables) numel += t.numel;
  // The optimizer state of a whole shard group is one process's, piece by piece.
  OptimizerStateBytes sum;
  size_t shard_floats = 0, lo = SIZE_MAX, hi = 0;
  for (const RankFigures& f : p.ranks) {
    sum.factors += f.optim.factors;
    sum.roots += f.optim.roots;
    sum.moments += f.optim.moments;
    sum.adamw += f.optim.adamw;
    sum.compensation += f.optim.compensation;
    sum.blocks += f.optim.blocks;
    shard_floats += f.shard_floats;
    lo = std::min(lo, f.optim.total());
    hi = std::max(hi, f.optim.total());
    // Sharded: the rank's shards and the whole-layer buffers in flight; else whole layers.
    const size_t held = p.world.sharded() ? f.shard_floats : numel;
    EXPECT_EQ(f.param_bytes, (held + p.param_buffers * p.largest_layer) * sizeof(float));
    EXPECT_EQ(f.grad_bytes, (held + p.grad_buffers * p.largest_layer) * sizeof(float));
  }
  EXPECT_EQ(sum.factors, p.one_rank_optim.factors);
  EXPECT_EQ(sum.roots, p.one_rank_optim.roots);
  EXPECT_EQ(sum.moments, p.one_rank_optim.moments);
  EXPECT_EQ(sum.adamw, p.one_rank_optim.adamw);
  EXPECT_EQ(sum.compensation, p.one_rank_optim.compensation);
  EXPECT_EQ(sum.blocks, p.one_rank_optim.blocks);
  EXPECT_EQ(sum.total(), p.one_rank_optim.total());
  EXPECT_EQ(shard_floats, numel);
  EXPECT_GE(hi * G, p.one_rank_optim.total());   // max >= total / G
  EXPECT_LE(lo * G, p.one_rank_optim.total());   // min <= total / G
  // The shards tile every layer.
  for (size_t l = 0; l < p.shards.size(); ++l) {
    const LayerShards& s = p.shards[l];
    EXPECT_EQ(s.world(), G);
    EXPECT_EQ(s.begin.front(), 0u);
    EXPECT_EQ(s.begin.back(), p.tables[l].numel);
  }
  if (!p.world.sharded()) return;
  EXPECT_GE(p.param_buffers, 2);
  EXPECT_GE(p.grad_buffers, 2);
  // Per micro-batch and layer, an all-gather for the forward, another for the backward (except
  // the embedding and the last `prefetch` layers, kept), and one reduce-scatter, each moving the
  // other ranks' parts (unpadded): the layer less the rank's own shard.
  const int L = static_cast<int>(p.shards.size());
  size_t group_sum = 0, times_numel = 0;
  for (int l = 0; l < L; ++l)
    times_numel += (l >= 1 && l < L - std::min(p.prefetch, L) ? 3 : 2) * p.tables[l].numel;
  for (const RankFigures& f : p.ranks) {
    size_t want = 0, largest = 1;
    for (int l = 0; l < L; ++l) {
      const LayerShards& s = p.shards[l];
      want += p.micro_batches * (l >= 1 && l < L - std::min(p.prefetch, L) ? 3 : 2) * (s.numel - s.count(f.group_rank)) * sizeof(float);
      largest = std::max(largest, s.count(f.group_rank));
    }
    EXPECT_EQ(f.comm.group, want);
    EXPECT_EQ(f.comm_buffer_bytes, largest * sizeof(float));   // Sharding's receive buffer
    group_sum += f.comm.group;
  }
  // Over the group: (G - 1) x what each collective moves.
  EXPECT_EQ(group_sum, p.micro_batches * static_cast<size_t>(G - 1) * times_numel * sizeof(float));
}

}  // namespace

TEST(WorldPlan, OlmoSoapDryRunAt8And64RanksPrintsShardMapAndPerRankMemory) {
  for (int W : {8, 64}) {
    SCOPED_TRACE("W = " + std::to_string(W));
    const auto t0 = std::chrono::steady_clock::now();
    const Config cfg = olmo_soap({"distributed.world_size=" + std::to_string(W)});
    const std::string out = dry_run_report(cfg);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_LT(seconds, 10.0) << "the dry run allocates nothing model-sized";
    // Today's report, then the world's.
    EXPECT_TRUE(has(out, "# memory estimate (fp32, one process)")) << out;
    EXPECT_TRUE(has(out, "# world of " + std::to_string(W) + " ranks: global batch " + std::to_string(W) + " x 4 x 512")) << out;
    EXPECT_TRUE(has(out, "# shard map (distributed.world_size " + std::to_string(W) + ", distributed.fsdp full")) << out;
    // OLMo-1B's 16 blocks share one map; wte is 25 row-blocks of <= 2048 rows; a block 13.
    EXPECT_TRUE(has(out, "blocks.0 .. blocks.15 (16 layers, each): 67.11M floats, 13 units; largest shard 16.78M floats")) << out;
    // The blocks' ranges go to other ranks layer by layer (shard_model's shifts).
    if (W == 8) {
      EXPECT_TRUE(has(out, "  owners: rank (range + shift) mod 8, shift 0 ")) << out;
    }
    EXPECT_TRUE(has(out, "embed: 103.02M floats, 25 units; largest shard")) << out;
    EXPECT_TRUE(has(out, "head: no parameters")) << out;
    if (W == 8) {
      EXPECT_TRUE(has(out, "  range 0: ")) << out;
      EXPECT_TRUE(has(out, "att_qkv rows ")) << out;
      EXPECT_TRUE(has(out, "  range 7: ")) << out;
    } else {
      // Summarized: more ranks than a block's 13 units, so most own none of it.
      EXPECT_FALSE(has(out, "  range 0: ")) << out;
      EXPECT_TRUE(has(out, "  1 unit, ")) << out;
      EXPECT_TRUE(has(out, "  no unit: 51 ranges (")) << out;
    }
    EXPECT_TRUE(has(out, "# per-rank memory (fp32, world " + std::to_string(W))) << out;
    EXPECT_TRUE(has(out, "params:           min ")) << out;
    EXPECT_TRUE(has(out, "whole-layer buffers for the gathered layers in flight")) << out;
    EXPECT_TRUE(has(out, "optimizer state:  min ")) << out;
    EXPECT_TRUE(has(out, "  over a shard group: ")) << out;
    EXPECT_TRUE(has(out, "comm buffers:     ")) << out;
    EXPECT_TRUE(has(out, "total (peak):     min ")) << out;
    EXPECT_TRUE(has(out, "# comm per step, per rank")) << out;
    EXPECT_TRUE(has(out, "shard group (" + std::to_string(W) + " ranks): gather + reduce_scatter min ")) << out;

    const WorldPlan p = plan_world(cfg);
    EXPECT_EQ(p.world.group, W);
    EXPECT_EQ(p.world.replicas, 1);
    expect_consistent(p);
    for (const RankFigures& f : p.ranks) EXPECT_EQ(f.comm.replicas, 0u);
    // The figures printed are the plan's.
    EXPECT_TRUE(has(out, "; " + std::to_string(p.one_rank_optim.blocks) + " blocks = " + std::to_string(p.one_rank_optim.blocks)))
        << out;
  }
}

TEST(WorldPlan, HybridAndReplicatedGroups) {
  // hybrid: shard groups of ranks_per_node, replicated across the nodes.
  {
    const Config cfg = olmo_soap({"distributed.world_size=8", "distributed.fsdp=hybrid", "distributed.ranks_per_node=4"});
    const WorldPlan p = plan_world(cfg);
    EXPECT_EQ(p.world.group, 4);
    EXPECT_EQ(p.world.replicas, 2);
    expect_consistent(p);
    // Across the 2 replicas each rank all-reduces its own shard: 2 (n-1)/n of it, per layer.
    for (const RankFigures& f : p.ranks) {
      size_t want = 0;
      for (const LayerShards& s : p.shards) want += 2 * 1 * s.count(f.group_rank) * sizeof(float) / 2;
      EXPECT_EQ(f.comm.replicas, want);
    }
    const std::string out = dry_run_report(cfg);
    EXPECT_TRUE(has(out, "2 node(s) of 4 ranks")) << out;
    EXPECT_TRUE(has(out, "shard group (4 ranks, inside a node): ")) << out;
    EXPECT_TRUE(has(out, "replica group (2 ranks, across nodes): all_reduce min ")) << out;
  }
  // none: every rank whole, the whole gradient all-reduced over all ranks.
  {
    const Config cfg = olmo_soap({"distributed.world_size=4", "distributed.fsdp=none"});
    const WorldPlan p = plan_world(cfg);
    EXPECT_EQ(p.world.group, 1);
    EXPECT_EQ(p.world.replicas, 4);
    ASSERT_EQ(p.ranks.size(), 1u);
    EXPECT_EQ(p.ranks[0].optim.total(), p.one_rank_optim.total());
    EXPECT_EQ(p.ranks[0].comm.group, 0u);
    EXPECT_EQ(p.ranks[0].comm_buffer_bytes, 0u);
    size_t want = 0;
    for (const ParamTable& t : p.tables) want += 2 * 3 * t.numel * sizeof(float) / 4;
    EXPECT_EQ(p.ranks[0].comm.replicas, want);
    const std::string out = dry_run_report(cfg);
    EXPECT_TRUE(has(out, "nothing is sharded")) << out;
    EXPECT_TRUE(has(out, "comm buffers:     none")) << out;
  }
  // hybrid needs the node size; a world that is no whole number of nodes is refused at load.
  EXPECT_TRUE(has(error_of([] { dry_run_report(olmo_soap({"distributed.world_size=8", "distributed.fsdp=hybrid"})); }),
                  "distributed.ranks_per_node"));
  const std::string e = error_of([] { olmo_soap({"distributed.world_size=6", "distributed.ranks_per_node=4"}); });
  EXPECT_TRUE(has(e, "distributed.world_size (6)") && has(e, "distributed.ranks_per_node (4)")) << e;
  EXPECT_TRUE(has(error_of([] { olmo_soap({"distributed.world_size=-1"}); }), "distributed.world_size"));
}

TEST(WorldPlan, UnsetWorldSizeLeavesTheReportAsItWas) {
  const std::string out = dry_run_report(olmo_soap({}));
  EXPECT_FALSE(has(out, "# shard map")) << out;
  EXPECT_FALSE(has(out, "# per-rank memory")) << out;
  EXPECT_TRUE(has(out, "  world_size: 0")) << out;   // the resolved config shows the key
}

namespace {

// The plan's ops as (lane, kind, layer) per line of describe_step_plan.
struct PlanLine {
  int id;
  std::string lane, kind, layer, rest;
};
std::vector<PlanLine> plan_lines(const std::string& text) {
  std::vector<PlanLine> out;
  std::istringstream in(text);
  std::string line;
  std::getline(in, line);   // "plan of step ..."
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    PlanLine p;
    if (!(ls >> p.id >> p.lane >> p.kind >> p.layer)) continue;   // the notes after the ops
    std::getline(ls, p.rest);
    out.push_back(p);
  }
  return out;
}

}  // namespace

TEST(WorldPlan, PrintPlanAtTwoRanksListsGatherAndReduceScatterOfEveryLayer) {
  const Config cfg = load_config(kConfigs + "/tiny-soap.yaml", {"distributed.world_size=2", "train.grad_accum=2"});
  const std::string text = describe_step_plan(cfg, 1);
  const std::vector<PlanLine> ops = plan_lines(text);
  const std::vector<std::string> names = model_layer_names(cfg.model);
  std::map<std::string, int> gathers, reductions;
  std::map<std::string, int> backward_last, first_forward, reduce_at, grad_norm_at;
  for (const PlanLine& op : ops) {
    if (op.kind == "gather") {
      EXPECT_EQ(op.lane, "comm") << text;
      EXPECT_TRUE(has(op.rest, "all-gather in the shard group of 2: ")) << op.rest;
      ++gathers[op.layer];
    }
    if (op.kind == "reduce_scatter") {
      EXPECT_EQ(op.lane, "comm") << text;
      ++reductions[op.layer];
      reduce_at[op.layer] = op.id;
    }
    if (op.kind == "forward" && !first_forward.count(op.layer)) first_forward[op.layer] = op.id;
    if (op.kind == "backward" && has(op.rest, "micro=1")) backward_last[op.layer] = op.id;
    if (op.kind == "grad_norm") grad_norm_at[op.layer] = op.id;
    EXPECT_NE(op.kind, "all_reduce") << text;
  }
  std::map<std::string, int> releases;
  for (const PlanLine& op : ops)
    if (op.kind == "release") {
      EXPECT_EQ(op.lane, "compute") << text;
      ++releases[op.layer];
    }
  const int L = static_cast<int>(names.size());
  for (int i = 0; i < L; ++i) {
    const std::string& l = names[i];
    // Per micro-batch: gathered for the forward, and again for the backward unless it is the
    // embedding (its backward reads no parameters) or one of the last `prefetch` (2) layers, kept.
    const bool again = i >= 1 && i < L - 2;
    EXPECT_EQ(gathers[l], 2 * (again ? 2 : 1)) << l << "\n" << text;
    EXPECT_EQ(releases[l], 2 * (again ? 2 : 1)) << l << "\n" << text;
    EXPECT_EQ(reductions[l], 2) << l << "\n" << text;
    // Listed after the layer's last backward, before its grad_norm.
    EXPECT_GT(reduce_at[l], backward_last[l]) << l;
    if (grad_norm_at.count(l)) {
      EXPECT_LT(reduce_at[l], grad_norm_at[l]) << l;
    }
  }
  EXPECT_TRUE(has(text, "comm lane: world 2, distributed.fsdp full (shard group of 2, 1 replica(s))")) << text;

  // fsdp none: one all_reduce per layer, no gathers.
  const std::string none = describe_step_plan(
      load_config(kConfigs + "/tiny-soap.yaml", {"distributed.world_size=2", "distributed.fsdp=none"}), 1);
  int all_reduces = 0;
  for (const PlanLine& op : plan_lines(none)) {
    EXPECT_NE(op.kind, "gather") << none;
    EXPECT_NE(op.kind, "reduce_scatter") << none;
    if (op.kind == "all_reduce") {
      EXPECT_EQ(op.lane, "comm");
      EXPECT_TRUE(has(op.rest, "all-reduce across 2 replicas")) << op.rest;
      ++all_reduces;
    }
  }
  EXPECT_EQ(all_reduces, static_cast<int>(names.size())) << none;

  // Unset (and a world of one): the one-rank plan, no comm lane.
  for (const char* w : {"distributed.world_size=0", "distributed.world_size=1"})
    for (const PlanLine& op : plan_lines(describe_step_plan(load_config(kConfigs + "/tiny-soap.yaml", {w}), 1)))
      EXPECT_NE(op.lane, "comm") << w;
}

TEST(WorldPlan, ARunRefusesAWorldSizeItDoesNotHave) {
  // A one-rank run (the trainer's own local communicator) with distributed.world_size 2.
  const std::string e = error_of([] {
    Trainer t(load_config(kConfigs + "/tiny-adamw.yaml",
                          {"distributed.world_size=2", "data.train=/nonexistent.bin", "run.dir=/nonexistent-run-dir"}));
  });
  EXPECT_TRUE(has(e, "distributed.world_size is 2 but this launch has 1 rank(s)")) << e;
  // World size 1 is this launch's: the run goes on (to its next check, the missing token file).
  const std::string ok = error_of([] {
    Trainer t(load_config(kConfigs + "/tiny-adamw.yaml",
                          {"distributed.world_size=1", "data.train=/nonexistent.bin", "run.dir=/nonexistent-run-dir"}));
  });
  EXPECT_FALSE(has(ok, "distributed.world_size")) << ok;
  EXPECT_TRUE(has(ok, "/nonexistent.bin")) << ok;
}

TEST(WorldPlan, WorldSizeMayChangeOnResume) {
  // A checkpoint of a 4-rank run (world_size 4 set: it was that launch's) resumes at 2.
  const Config saved = load_config(kConfigs + "/tiny-adamw.yaml", {"distributed.world_size=4"});
  const Config now = load_config(kConfigs + "/tiny-adamw.yaml", {"distributed.world_size=2"});
  EXPECT_EQ(error_of([&] { check_resume_compatible(saved, now, Manifest{}, "ckpt", 2); }), "(no error)");
  // The key is written in the resolved config and read back.
  EXPECT_EQ(load_config_text(config_to_yaml(saved), "resolved").distributed.world_size, 4);
}

TEST(WorldPlan, CoherenceOwnersAndBytesPerRefreshPeriod) {
  // fsdp none, 4 ranks as 2 nodes x 2, SOAP in asteria mode: every block has one owner, the
  // owners' refresh costs are balanced, and hierarchical shipping sends half of flat's bytes
  // between the nodes (once per node instead of once per replica there).
  Config cfg = load_config(kConfigs + "/bench-small-soap.yaml", {"distributed.world_size=4", "distributed.fsdp=none",
                                                                  "distributed.ranks_per_node=2", "runtime.mode=asteria"});
  const CoherencePlan c = plan_coherence(cfg, plan_world(cfg));
  ASSERT_TRUE(c.active);
  EXPECT_EQ(c.replicas, 4);
  EXPECT_EQ(c.groups, 1);
  EXPECT_EQ(c.nodes, 2);
  EXPECT_GT(c.blocks, 0);
  EXPECT_LE(c.blocks_max - c.blocks_min, c.blocks);
  EXPECT_GT(c.cost_min, 0.5);
  EXPECT_LT(c.cost_max, 1.5);
  EXPECT_EQ(2 * c.hier_inter, c.flat_inter);
  EXPECT_EQ(c.hier_inter + c.hier_intra, c.flat_inter + c.flat_intra);   // 3 hops per version either way
  EXPECT_TRUE(has(dry_run_report(cfg), "# coherence (runtime.mode asteria")) << dry_run_report(cfg);
  // Native mode, AdamW or no replicas: no coherence.
  cfg.runtime.mode = RuntimeMode::Native;
  EXPECT_FALSE(plan_coherence(cfg, plan_world(cfg)).active);
  EXPECT_FALSE(has(dry_run_report(cfg), "# coherence"));
  cfg.runtime.mode = RuntimeMode::Asteria;
  cfg.distributed.fsdp = FsdpMode::Full;
  EXPECT_FALSE(plan_coherence(cfg, plan_world(cfg)).active);
}

TEST(WorldPlan, ReplicatedAsteriaPlanSyncsVersionsOnTheCommLaneBeforePublishing) {
  // A step that publishes refreshes (tiny-soap refreshes at 1, 11, ...; delay 2): every publish_wait
  // waits for its layer's coherence_sync, which runs on the comm lane after the step's last
  // gradient reduction (plan order on the comm lane) and before clip_grads, so that it overlaps
  // the end of the backward; with the refreshes on the compute lane, the parts of refreshes
  // opened at earlier steps run right after the last backward too, and this step's at its end.
  const Config cfg = load_config(kConfigs + "/tiny-soap.yaml",
                                 {"distributed.world_size=2", "distributed.fsdp=none", "runtime.mode=asteria",
                                  "runtime.shadow.delay=2", "runtime.shadow.sync_steps=0", "optim.precondition_frequency=10",
                                  "runtime.shadow.lane=compute"});
  const std::string text = describe_step_plan(cfg, 13);
  int clip = -1, syncs = 0, waits = 0, last_reduce = -1;
  std::map<std::string, int> sync_of;
  for (const PlanLine& op : plan_lines(text)) {
    if (op.kind == "clip_grads") clip = op.id;
    if (op.kind == "all_reduce") last_reduce = op.id;
    if (op.kind == "coherence_sync") {
      EXPECT_EQ(op.lane, "comm") << text;
      EXPECT_GT(op.id, last_reduce) << text;
      EXPECT_EQ(clip, -1) << text;
      sync_of[op.layer] = op.id;
      ++syncs;
    }
    if (op.kind == "publish_wait") {
      ASSERT_TRUE(sync_of.count(op.layer)) << text;
      EXPECT_TRUE(has(op.rest, "after=" + std::to_string(sync_of[op.layer]))) << op.rest;
      ++waits;
    }
  }
  EXPECT_GT(syncs, 0) << text;
  EXPECT_EQ(syncs, waits);
  // Over a period of steps: parts of refreshes opened at earlier steps (root_jobs block=0) run
  // between the last backward and clip_grads, those opened at the step (block=1) after clip_grads.
  int earlier = 0, now = 0;
  for (int64_t step = 12; step < 22; ++step) {
    const std::string plan = describe_step_plan(cfg, step);
    int clip_at = -1, backward_at = -1;
    for (const PlanLine& op : plan_lines(plan)) {
      if (op.kind == "clip_grads") clip_at = op.id;
      if (op.kind == "backward") backward_at = op.id;
      if (op.kind != "root_jobs") continue;
      if (has(op.rest, "block=0")) {
        ++earlier;
        EXPECT_GT(op.id, backward_at) << plan;
        EXPECT_EQ(clip_at, -1) << plan;
      } else {
        ++now;
        EXPECT_TRUE(has(op.rest, "block=1")) << plan;
        EXPECT_GT(clip_at, 0) << plan;
      }
    }
  }
  EXPECT_GT(earlier, 0);
  EXPECT_GT(now, 0);
  // Without replicas no coherence_sync.
  EXPECT_FALSE(has(describe_step_plan(load_config(kConfigs + "/tiny-soap.yaml",
                                                  {"runtime.mode=asteria", "runtime.shadow.delay=2",
                                                   "runtime.shadow.sync_steps=0", "optim.precondition_frequency=10"}),
                                      13),
                   "coherence_sync"));
}
