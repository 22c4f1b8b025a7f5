// The tiered state manager's plan-time moves (runtime/tier_planner.hpp): replayed here against
// an independent model of the device tier's cache, step after step.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "runtime/plan_builder.hpp"
#include "runtime/tier_planner.hpp"
#include "train/step_plan.hpp"

using namespace asteria;

namespace {

// Layer l's states: one warm state per entry of pages[l] (warm states are never homed on the
// device, so every one of them visits the cache).
std::vector<std::vector<StateSpec>> warm_specs(const std::vector<std::vector<size_t>>& pages) {
  std::vector<std::vector<StateSpec>> s(pages.size());
  for (size_t l = 0; l < pages.size(); ++l)
    for (size_t k = 0; k < pages[l].size(); ++k)
      s[l].push_back({"l" + std::to_string(l) + "." + std::to_string(k), pages[l][k] * kTierPage / 4, StateClass::Warm, {}, {}});
  return s;
}

TierLayout layout_of(const std::vector<std::vector<size_t>>& pages, size_t device_pages, int distance) {
  TierOptions o;
  o.budget = {device_pages * kTierPage, kUnbounded, kUnbounded};
  o.prefetch_distance = distance;
  return place_states(warm_specs(pages), o);
}

// The device bytes a refusal of place_and_plan_states says would work.
size_t bytes_that_work(const Error& e) {
  const std::string m = e.what();
  const size_t at = m.find("needs ");
  EXPECT_NE(at, std::string::npos) << m;
  return at == std::string::npos ? 0 : std::stoull(m.substr(at + 6));
}

// A layout the planner can serve at this device budget, or at the one its refusal names.
TierLayout workable_layout(const std::vector<std::vector<size_t>>& pages, size_t device_pages, int distance,
                           bool* refused = nullptr) {
  TierOptions o;
  o.budget = {device_pages * kTierPage, kUnbounded, kUnbounded};
  o.prefetch_distance = distance;
  try {
    return place_and_plan_states(warm_specs(pages), o);
  } catch (const Error& e) {
    if (refused) *refused = true;
    EXPECT_GT(bytes_that_work(e), o.budget[0]);
    o.budget[0] = bytes_that_work(e);
    return place_and_plan_states(warm_specs(pages), o);
  }
}

// The plans of a training step with the tier planner between the model's and the optimizer's
// ops, as the trainer registers them.
struct StepPlans {
  explicit StepPlans(const TierLayout& layout) : planner(layout) {
    builder.add_contributor(&model);
    builder.add_contributor(&planner);
    builder.add_contributor(&optim);
  }
  const Plan& build(int64_t step, int micro_batches) {
    builder.build({step, planner.layout().num_layers(), micro_batches}, plan);
    return plan;
  }

  TierPlanner planner;
  ModelStepOps model{false};
  OptimizerStepOps optim;
  PlanBuilder builder;
  Plan plan;
};

// Builds `steps` plans and replays their tier ops on a model of the cache, checking every
// invariant; returns the number of states loaded.
struct Replay {
  const TierLayout& layout;
  std::map<int, size_t> resident;   // state -> device offset (visiting states only)
  size_t used = 0, peak = 0;
  int loads = 0;

  // Next use (in uses counted from the start of this step) of a state's layer, from `current`.
  int next_use(int state, int current) const {
    const int L = layout.num_layers();
    const int u = L - 1 - layout.states[state].layer;
    return u >= current ? u : u + L;
  }

  void run(int steps) {
    StepPlans plans(layout);
    const TierPlanner& planner = plans.planner;
    const int L = layout.num_layers();
    for (int step = 1; step <= steps; ++step) {
      const Plan& plan = plans.build(step, 2);
      int current = 0;   // uses finished in this step before the op
      for (size_t i = 0; i < plan.ops.size(); ++i) {
        const Op& op = plan.ops[i];
        if (op.kind == OpKind::OptimStep) {
          EXPECT_EQ(op.layer, L - 1 - current);
          for (int id : layout.by_layer[op.layer])
            EXPECT_TRUE(resident.count(id)) << "step " << step << ": " << layout.states[id].spec.name
                                            << " is not on the device at its optim_step";
          ++current;
        }
        if (op.kind == OpKind::TierWait) {
          ASSERT_EQ(op.deps.size(), 1u);
          EXPECT_EQ(plan.ops[op.deps[0]].kind, OpKind::TierPrefetch);
          EXPECT_EQ(plan.ops[op.deps[0]].layer, op.layer);
          EXPECT_EQ(plan.ops[i + 1].kind, OpKind::OptimStep);
        }
        if (op.kind == OpKind::TierEvict) evict(planner.moves(op.tag), plan, i, current);
        if (op.kind == OpKind::TierPrefetch) load(planner.moves(op.tag), op.layer);
      }
      EXPECT_EQ(planner.planned_cache_bytes(), used);
      for (auto [id, off] : resident) EXPECT_EQ(planner.planned_offset(id), static_cast<int64_t>(off));
    }
  }

  void evict(const std::vector<TierMove>& moves, const Plan& plan, size_t at, int current) {
    // The evicting op is followed by the prefetch it makes room for: the uses from `current` to
    // that prefetch's use are in flight and must stay.
    ASSERT_LT(at + 1, plan.ops.size());
    ASSERT_EQ(plan.ops[at + 1].kind, OpKind::TierPrefetch);
    const int L = layout.num_layers();
    const int target_use = L - 1 - plan.ops[at + 1].layer;
    const int target = target_use >= current ? target_use : target_use + L;
    int nearest_victim = 1 << 30;
    for (const TierMove& m : moves) {
      ASSERT_EQ(m.kind, TierMove::Kind::Evict);
      ASSERT_TRUE(resident.count(m.state)) << "evicting a state that is not resident";
      EXPECT_EQ(resident[m.state], m.device_offset);
      EXPECT_GT(next_use(m.state, current), target) << "evicted a state in flight";
      nearest_victim = std::min(nearest_victim, next_use(m.state, current));
      used -= layout.states[m.state].slot;
      resident.erase(m.state);
    }
    // Belady: every state kept is needed no later than every state evicted.
    for (auto [id, off] : resident) {
      const int next = next_use(id, current);
      if (next > target) {
        EXPECT_LE(next, nearest_victim) << "kept " << layout.states[id].spec.name;
      }
    }
  }

  void load(const std::vector<TierMove>& moves, int layer) {
    const size_t base = layout.device_home_bytes;
    for (const TierMove& m : moves) {
      ASSERT_EQ(m.kind, TierMove::Kind::Load);
      const TierState& s = layout.states[m.state];
      EXPECT_EQ(s.layer, layer);
      ASSERT_FALSE(resident.count(m.state)) << "loaded twice";
      // Inside the cache region, overlapping no resident state.
      EXPECT_GE(m.device_offset, base);
      EXPECT_LE(m.device_offset + s.slot, base + layout.device_cache_bytes);
      for (auto [id, off] : resident)
        EXPECT_TRUE(m.device_offset + s.slot <= off || off + layout.states[id].slot <= m.device_offset)
            << s.spec.name << " overlaps " << layout.states[id].spec.name;
      resident[m.state] = m.device_offset;
      used += s.slot;
      peak = std::max(peak, used);
      ++loads;
    }
    EXPECT_LE(base + used, layout.options.budget[0]);
  }
};

// The fewest loads any eviction policy needs to serve `steps` steps (one state of one page per
// layer, cache of `cache` pages, each layer loaded right before its use): exhaustive search
// over every choice of victim, memoized on (position, resident set).
int fewest_loads(int L, int cache, int steps) {
  const int n = L * steps;
  std::map<std::pair<int, unsigned>, int> memo;
  std::function<int(int, unsigned)> best = [&](int pos, unsigned set) -> int {
    if (pos == n) return 0;
    auto key = std::make_pair(pos, set);
    if (auto it = memo.find(key); it != memo.end()) return it->second;
    const int layer = L - 1 - pos % L;
    const unsigned bit = 1u << layer;
    int r;
    if (set & bit) {
      r = best(pos + 1, set);
    } else if (__builtin_popcount(set) < cache) {
      r = 1 + best(pos + 1, set | bit);
    } else {
      r = 1 << 30;
      for (int v = 0; v < L; ++v)
        if (set & (1u << v)) r = std::min(r, 1 + best(pos + 1, (set & ~(1u << v)) | bit));
    }
    return memo[key] = r;
  };
  return best(0, 0);
}

}  // namespace

TEST(TierPlanner, LoadsAsFewAsAnyEvictionPolicyCould) {
  for (auto [L, cache] : {std::pair{5, 3}, std::pair{6, 4}, std::pair{7, 2}, std::pair{4, 3}}) {
    const int steps = 4;
    TierLayout layout = layout_of(std::vector<std::vector<size_t>>(L, {1}), cache, 0);
    ASSERT_EQ(layout.device_cache_bytes, static_cast<size_t>(cache) * kTierPage);
    Replay r{layout, {}};
    r.run(steps);
    EXPECT_EQ(r.loads, fewest_loads(L, cache, steps)) << L << " layers, cache of " << cache;
  }
}

TEST(TierPlanner, EvictsFurthestNextUseAndStaysInBudgetWithPrefetch) {
  // Uneven layers, several states each, prefetch distances 0 to 2, over several steps.
  const std::vector<std::vector<size_t>> pages = {{3, 1}, {2}, {1, 1, 2}, {4}, {2, 2}, {1}, {3}, {2, 1}};
  for (int distance : {0, 1, 2}) {
    for (size_t device : {12, 15, 20}) {
      SCOPED_TRACE("distance " + std::to_string(distance) + ", device " + std::to_string(device) + " pages");
      TierLayout layout = workable_layout(pages, device, distance);
      ASSERT_TRUE(layout.moves());
      Replay r{layout, {}};
      r.run(5);
      EXPECT_LE(r.peak, layout.device_cache_bytes);
      EXPECT_GT(r.loads, 0);
    }
  }
}

TEST(TierPlanner, PrefetchesAheadOfUse) {
  // Distance 2: the first two uses are prefetched at the start of the step (before any forward),
  // use i >= 2 right before optim_step of use i - 2.
  TierLayout layout = layout_of(std::vector<std::vector<size_t>>(6, {1}), 4, 2);
  StepPlans plans(layout);
  const Plan& plan = plans.build(1, 1);
  std::vector<int> prefetch_layers;
  int first_forward = -1, optim_steps_before_last_prefetch = 0, optim_steps = 0;
  for (const Op& op : plan.ops)
    if (op.kind == OpKind::Forward && first_forward < 0) first_forward = op.id;
  ASSERT_GT(first_forward, 0);
  for (const Op& op : plan.ops) {
    if (op.kind == OpKind::OptimStep) ++optim_steps;
    if (op.kind == OpKind::TierPrefetch) {
      EXPECT_EQ(op.lane, Lane::Staging);
      if (prefetch_layers.size() < 2) {
        EXPECT_LT(op.id, first_forward);
      }
      prefetch_layers.push_back(op.layer);
      optim_steps_before_last_prefetch = optim_steps;
    }
  }
  EXPECT_EQ(prefetch_layers, (std::vector<int>{5, 4, 3, 2, 1, 0}));
  EXPECT_EQ(optim_steps_before_last_prefetch, 3);   // layer 0 (use 5) is loaded before use 3's step
  // Describe says what moves.
  for (const Op& op : plan.ops)
    if (op.kind == OpKind::TierPrefetch) {
      EXPECT_NE(plans.planner.describe(op).find("host->device"), std::string::npos);
    }
}

TEST(TierPlanner, NothingToPlanWhenEverythingIsOnTheDevice) {
  TierLayout layout = layout_of(std::vector<std::vector<size_t>>(4, {1}), 100, 2);
  EXPECT_FALSE(layout.moves());
  StepPlans plans(layout);
  const Plan& plan = plans.build(1, 1);
  for (const Op& op : plan.ops) EXPECT_TRUE(op.kind != OpKind::TierPrefetch && op.kind != OpKind::TierEvict);
}

TEST(TierPlanner, FragmentedCacheGetsRoomOrAnErrorWithTheBytesThatWork) {
  // Uneven layers at a device budget of exactly the layers in flight: where first-fit loads
  // fragment the cache, placement keeps more of the device for the cache (fewer hot states
  // homed) or, when the budget has no more, says how many bytes work; that many do.
  int refused = 0, tried = 0;
  for (const std::vector<std::vector<size_t>>& pages :
       {std::vector<std::vector<size_t>>{{3, 1}, {2}, {1, 1, 2}, {4}, {2, 2}, {1}, {3}, {2, 1}},
        std::vector<std::vector<size_t>>{{5}, {1}, {3}, {2}, {6}, {1}, {4}, {2}, {3}},
        std::vector<std::vector<size_t>>{{2, 3}, {7}, {1}, {1, 4}, {3}, {2, 2, 1}}}) {
    for (int distance : {1, 2, 3}) {
      ++tried;
      SCOPED_TRACE("config " + std::to_string(tried));
      bool refused_here = false;
      TierLayout layout = workable_layout(pages, tier_cache_need(warm_specs(pages), distance) / kTierPage,
                                          distance, &refused_here);
      refused += refused_here;
      Replay r{layout, {}};
      r.run(12);
    }
  }
  EXPECT_GT(refused, 0) << "no configuration fragmented: the test does not reach the refusal";
  EXPECT_LT(refused, tried);
}

// Layers moved in parts: every step starts from an empty cache (the first tier op writes back
// what the step before left), so that every step plans the same moves at the same addresses,
// whatever the sizes of the many small states.
TEST(TierPlanner, PartsStartEveryStepFromAnEmptyCache) {
  const size_t page = kTierPage / 4;
  std::vector<std::vector<StateSpec>> s(3);
  for (int l = 0; l < 3; ++l)
    for (int b = 0; b < 6; ++b) {   // uneven blocks: best-fit addresses would drift
      const std::string block = "l" + std::to_string(l) + ".b" + std::to_string(b);
      s[l].push_back({block + " / L", (1 + (b + l) % 3) * page, StateClass::Warm, {8, 8}, {}});
      s[l].push_back({block + " / QL", (1 + b % 2) * page, StateClass::Warm, {8, 8}, {}});
    }
  TierOptions o;
  o.budget = {16 * kTierPage, kUnbounded, kUnbounded};
  o.prefetch_distance = 1;
  o.min_blocks_per_part = 2;
  const TierLayout layout = place_and_plan_states(s, o);
  ASSERT_GT(layout.blocks_per_part, 0);
  TierPlanner planner(layout);
  PlanBuilder builder;
  builder.add_contributor(&planner);
  Plan plan;
  std::vector<std::vector<int64_t>> at_end;
  for (int64_t step = 1; step <= 3; ++step) {
    builder.build({step, layout.num_layers(), 1, &layout.parts}, plan);
    const Op* first = nullptr;
    for (const Op& op : plan.ops)
      if (!first && (op.kind == OpKind::TierEvict || op.kind == OpKind::TierPrefetch)) first = &op;
    ASSERT_NE(first, nullptr);
    if (step == 1) {
      EXPECT_EQ(first->kind, OpKind::TierPrefetch);   // nothing to write back yet
    } else {
      ASSERT_EQ(first->kind, OpKind::TierEvict);
      size_t resident = 0;
      for (int64_t off : at_end.back()) resident += off >= 0;
      EXPECT_EQ(planner.moves(first->tag).size(), resident);
    }
    at_end.emplace_back();
    for (size_t id = 0; id < layout.states.size(); ++id) at_end.back().push_back(planner.planned_offset(static_cast<int>(id)));
  }
  EXPECT_EQ(at_end[1], at_end[0]);
  EXPECT_EQ(at_end[2], at_end[0]);
}
