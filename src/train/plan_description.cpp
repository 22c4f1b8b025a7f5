#include "train/plan_description.hpp"

#include <algorithm>
#include <memory>
#include <vector>

#include "core/error.hpp"
#include "fsdp/param_offload_plan_ops.hpp"
#include "fsdp/sharding_plan_ops.hpp"
#include "model/model.hpp"
#include "optim/blocks.hpp"
#include "optim/refresh_schedule.hpp"
#include "runtime/root_job_placement.hpp"
#include "runtime/shadow.hpp"
#include "runtime/tier_planner.hpp"
#include "train/estimates/placement.hpp"
#include "train/estimates/world_plan.hpp"
#include "train/run_settings.hpp"
#include "train/step_plan.hpp"
#include "train/tier_config.hpp"

namespace asteria {

namespace {

// The comm lane's part of a planned launch, and the line that explains it.
struct PlannedComm {
  std::unique_ptr<WorldPlan> world;
  std::unique_ptr<ShardingPlanOps> ops;
  std::string note;
};

PlannedComm plan_comm(const Config& cfg, int layers) {
  PlannedComm c;
  if (cfg.distributed.world_size <= 0) return c;
  c.world = std::make_unique<WorldPlan>(plan_world(cfg));
  const PlannedWorld& w = c.world->world;
  const bool tied = cfg.model.tied_embeddings;
  c.ops = std::make_unique<ShardingPlanOps>(w.sharded(), w.reduces(), cfg.distributed.prefetch, tied);
  c.note = "comm lane: world " + std::to_string(w.world) + ", distributed.fsdp " + to_string(w.mode) + " (shard group of " +
           std::to_string(w.group) + ", " + std::to_string(w.replicas) + " replica(s)); " +
           (w.sharded() ? "gathers " + std::to_string(cfg.distributed.prefetch) + " layer(s) ahead, in " +
                              std::to_string(ShardingPlanOps::param_buffers(cfg.distributed.prefetch, layers, tied)) +
                              " parameter and " + std::to_string(ShardingPlanOps::grad_buffers(tied)) +
                              " gradient buffer(s) of whole layers\n"
                        : std::string(w.reduces() ? "replicated: one all_reduce per layer\n" : "one rank: no collectives\n"));
  return c;
}

// The shadow pipeline's part: its ops follow from the refresh schedule alone (no optimizer state).
struct PlannedShadow {
  std::unique_ptr<RefreshSchedule> schedule;
  std::unique_ptr<RootJobPlacement> placement;
  std::unique_ptr<ShadowPlanOps> ops;
  std::string note;
};

PlannedShadow plan_shadow(const Config& cfg, const std::vector<ParamTable>& tables, int64_t step, const WorldPlan* world) {
  PlannedShadow p;
  if (!describe(cfg.optim.name).refreshes) return p;
  const int L = static_cast<int>(tables.size());
  std::vector<std::vector<MatrixBlock>> blocks;
  std::vector<int> counts;
  for (int l = 0; l < L; ++l) {
    blocks.push_back(layer_blocks(l, tables[l], cfg.optim.max_preconditioner_dim, cfg.optim.precondition_embeddings));
    counts.push_back(static_cast<int>(blocks.back().size()));
  }
  p.schedule = std::make_unique<RefreshSchedule>(cfg.optim.name, cfg.optim.precondition_frequency,
                                                 cfg.optim.start_preconditioning_step, cfg.runtime.staggered(), blocks);
  int due = 0;
  for (int l = 0; l < L; ++l)
    for (int b = 0; b < counts[l]; ++b) due += p.schedule->due(l, b, step);
  const ShadowDelay delay = shadow_delay(cfg);
  const ShadowLane lane = shadow_lane(cfg);
  const bool workers = lane != ShadowLane::Compute;
  const bool asteria = cfg.runtime.mode == RuntimeMode::Asteria;
  p.note = "refreshes at this step: " + std::to_string(due) + " block(s) (" +
           (asteria ? "shadow pipeline, delay " + std::to_string(delay.at(step)) + ", root jobs on the " +
                          (lane == ShadowLane::Device ? "workers, by the GPU's solvers"
                           : workers        ? "host workers"
                                            : "compute lane, in parts")
                    : std::string("native: inline in optim_step")) +
           ")\n";
  if (!asteria) return p;
  if (!workers && delay.delay > 0)
    p.placement = std::make_unique<RootJobPlacement>(*p.schedule, refresh_part_costs(cfg.optim.name, blocks), delay,
                                                     compute_threads(cfg), world && world->world.reduces());
  // A planned launch with replicated state: the coherence_sync ops too.
  const bool coherent = world && plan_coherence(cfg, *world).active;
  p.ops = std::make_unique<ShadowPlanOps>(*p.schedule, counts, delay, p.placement.get(), coherent);
  return p;
}

// The run's plan is that of its placement (of the config as given when it cannot fit here).
Config placed_or_given(const Config& given) {
  try {
    return place_for_planning(given).cfg;
  } catch (const Error&) {
    return given;
  }
}

}  // namespace

std::string describe_step_plan(const Config& given, int64_t step) {
  const Config cfg = placed_or_given(given);
  const auto tables = model_param_tables(cfg.model);
  const std::vector<std::string> names = model_layer_names(cfg.model);
  const int L = static_cast<int>(tables.size());
  ModelStepOps model_ops(cfg.model.tied_embeddings, model_recomputed_layers(cfg.model, cfg.train.recompute()));
  OptimizerStepOps optim_ops;
  const PlannedComm comm = plan_comm(cfg, L);
  const PlannedShadow shadow = plan_shadow(cfg, tables, step, comm.world.get());
  const TierLayout layout = configured_tier_layout(cfg);   // the planner keeps a reference
  TierPlanner tiers(layout);
  PlanBuilder builder;
  std::unique_ptr<ParamOffloadPlanOps> params_ops;
  if (cfg.runtime.tiers.params.home == ParamsHome::Disk)
    params_ops = std::make_unique<ParamOffloadPlanOps>(params_on_disk(cfg), cfg.runtime.tiers.params.prefetch_distance);
  add_step_contributors(builder, {.model = &model_ops,
                                  .sharding = comm.ops.get(),
                                  .params = params_ops.get(),
                                  .shadow = shadow.ops.get(),
                                  .tiers = &tiers,
                                  .optimizer = &optim_ops});
  // The tiers' moves depend on what earlier steps left in the device cache: with a cache that
  // steps keep, plan every step up to this one (nothing runs; about 10 ms a step for OLMo-1B's
  // 512 micro-batches); with one that each step empties first, the step before (what it writes
  // back); with none, this step alone. Every other contributor's ops follow from the step.
  Plan plan;
  const int64_t first = !layout.moves() ? step : layout.fresh_each_step ? std::max<int64_t>(1, step - 1) : 1;
  for (int64_t s = first; s <= step; ++s) builder.build({s, L, cfg.train.grad_accum, &layout.parts}, plan);
  return plan.describe(names, [&](const Op& op) {
           if (op.lane == Lane::Comm && comm.world) return comm_op_detail(*comm.world, op, cfg.train.grad_accum);
           return op.kind == OpKind::RootJobBatch ? shadow.ops->describe(op, names) : tiers.describe(op);
         }) + shadow.note + comm.note;
}

}  // namespace asteria
