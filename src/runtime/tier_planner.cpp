#include "runtime/tier_planner.hpp"

#include <algorithm>
#include <cstdio>
#include <set>

#include "core/error.hpp"

namespace asteria {

TierPlanner::TierPlanner(const TierLayout& layout) : layout_(layout) { reset(); }

void TierPlanner::reset() {
  num_uses_ = layout_.num_units();
  distance_ = layout_.options.prefetch_distance;
  cache_ = OffsetAllocator(layout_.device_cache_bytes);
  offset_.assign(layout_.states.size(), -1);
  load_op_.assign(static_cast<size_t>(num_uses_), -1);
  moves_used_ = 0;
  uses_of_.assign(layout_.states.size(), {});
  for (int u = 0; u < num_uses_; ++u)
    for (int id : layout_.units[u].states) uses_of_[id].push_back(u);
  for (size_t id = 0; id < layout_.states.size(); ++id)
    if (layout_.states[id].home == Tier::Device) offset_[id] = static_cast<int64_t>(layout_.states[id].home_offset);
}

std::vector<TierMove>& TierPlanner::next_move_list() {
  if (moves_used_ == moves_.size()) moves_.emplace_back();
  std::vector<TierMove>& list = moves_[moves_used_++];
  list.clear();
  return list;
}

void TierPlanner::micro_begin(PlanBuilder& b, int micro) {
  if (micro != 0 || !layout_.moves()) return;
  moves_used_ = 0;
  std::fill(load_op_.begin(), load_op_.end(), -1);
  flush_op_ = layout_.fresh_each_step ? flush(b) : -1;
  // The first uses of the optimizer are prefetched while forward and backward run.
  for (int use = 0; use < std::min(distance_, num_uses_); ++use) ensure(b, use, 0);
}

void TierPlanner::optimizer_part(PlanBuilder& b, int layer, BlockRange part) {
  if (!layout_.moves()) return;
  const int use = layout_.unit_of(layer, part.first);
  ASTERIA_ASSERT(layout_.units[use].blocks == part, "layer ", layer, ": the plan's part differs from the tiers' unit");
  if (distance_ == 0) ensure(b, use, use);
  if (distance_ > 0 && use + distance_ < num_uses_) ensure(b, use + distance_, use);
  if (load_op_[use] < 0) return;
  Op wait;
  wait.kind = OpKind::TierWait;
  wait.layer = layer;
  wait.blocks = part;
  wait.deps = {load_op_[use]};
  b.add(std::move(wait));
}

void TierPlanner::evict_state(int id, std::vector<TierMove>& list) {
  const size_t off = static_cast<size_t>(offset_[id]);
  list.push_back({TierMove::Kind::Evict, id, off});
  cache_.release(off - layout_.device_home_bytes, layout_.states[id].slot);
  offset_[id] = -1;
}

int TierPlanner::flush(PlanBuilder& b) {
  std::vector<TierMove>& list = next_move_list();
  for (size_t id = 0; id < offset_.size(); ++id)
    if (offset_[id] >= 0 && layout_.states[id].home != Tier::Device) evict_state(static_cast<int>(id), list);
  if (list.empty()) {
    --moves_used_;
    return -1;
  }
  Op op;
  op.kind = OpKind::TierEvict;
  op.lane = Lane::Staging;
  op.tag = static_cast<int64_t>(moves_used_ - 1);
  return b.add(std::move(op));
}

int TierPlanner::pick_victim(int use, int current) const {
  int best = -1;
  int best_next = -1;
  for (size_t id = 0; id < offset_.size(); ++id) {
    const TierState& s = layout_.states[id];
    if (offset_[id] < 0 || s.home == Tier::Device) continue;
    // Its next use from now (its uses repeat every step).
    const std::vector<int>& uses = uses_of_[id];
    const auto later = std::lower_bound(uses.begin(), uses.end(), current);
    const int next = later != uses.end() ? *later : uses.front() + num_uses_;
    if (next <= use) continue;                                // needed before (or by) this use
    const bool better = next > best_next ||
                        (next == best_next && s.slot > layout_.states[best].slot);   // ties: larger first
    if (better) {
      best = static_cast<int>(id);
      best_next = next;
    }
  }
  return best;
}

void TierPlanner::ensure(PlanBuilder& b, int use, int current) {
  const TierUnit& unit = layout_.units[use];
  const int layer = unit.layer;
  // The unit's states not on the device, largest first (packs best).
  std::vector<int>& need = need_;
  need.clear();
  for (int id : unit.states)
    if (offset_[id] < 0) need.push_back(id);
  if (need.empty()) return;
  std::stable_sort(need.begin(), need.end(),
                   [&](int a, int b) { return layout_.states[a].slot > layout_.states[b].slot; });
  // Place them all at once; while that fails, evict the resident state used furthest ahead and
  // retry (so evictions happen only when needed, and a unit is never split by fragmentation
  // that evicting more could cure).
  std::vector<size_t>& at = at_;
  // Move lists by index: next_move_list() may reallocate moves_.
  int64_t evict_tag = -1, load_tag = -1;
  const size_t base = layout_.device_home_bytes;
  for (;;) {
    at.clear();
    for (int id : need) {
      std::optional<size_t> a = cache_.allocate(layout_.states[id].slot);
      if (!a) break;
      at.push_back(*a);
    }
    if (at.size() == need.size()) break;
    for (size_t k = 0; k < at.size(); ++k) cache_.release(at[k], layout_.states[need[k]].slot);
    const int victim = pick_victim(use, current);
    if (victim < 0)
      fail("the device tier's cache (", layout_.device_cache_bytes, " bytes) cannot hold the optimizer state "
           "of the units in flight at use ", use, " (layer ", layer, "): its free space is too small or "
           "fragmented; raise runtime.tiers.device.bytes or lower runtime.tiers.prefetch_distance");
    if (evict_tag < 0) {
      next_move_list();
      evict_tag = static_cast<int64_t>(moves_used_ - 1);
    }
    evict_state(victim, moves_[evict_tag]);
  }
  next_move_list();
  load_tag = static_cast<int64_t>(moves_used_ - 1);
  for (size_t k = 0; k < need.size(); ++k) {
    offset_[need[k]] = static_cast<int64_t>(base + at[k]);
    moves_[load_tag].push_back({TierMove::Kind::Load, need[k], base + at[k]});
  }
  int evict_op = -1;
  if (evict_tag >= 0) {
    Op op;
    op.kind = OpKind::TierEvict;
    op.lane = Lane::Staging;
    op.tag = evict_tag;
    // Its victims' last use (an earlier optim_step) has finished: the executor only enqueues a
    // staging op once the compute ops before it ran. The dependency says so explicitly.
    const int last_step = b.find(OpKind::OptimStep);
    if (last_step >= 0) op.deps = {last_step};
    evict_op = b.add(std::move(op));
  }
  if (load_tag >= 0) {
    Op op;
    op.kind = OpKind::TierPrefetch;
    op.lane = Lane::Staging;
    op.layer = layer;
    op.blocks = unit.blocks;
    op.tag = load_tag;
    if (evict_op >= 0) op.deps = {evict_op};
    if (flush_op_ >= 0) op.deps.push_back(flush_op_);
    load_op_[use] = b.add(std::move(op));
  }
}

std::string TierPlanner::describe(const Op& op) const {
  if (op.kind != OpKind::TierEvict && op.kind != OpKind::TierPrefetch) return "";
  size_t count[kNumTiers] = {}, bytes[kNumTiers] = {};
  for (const TierMove& m : moves(op.tag)) {
    const TierState& s = layout_.states[m.state];
    ++count[static_cast<int>(s.home)];
    bytes[static_cast<int>(s.home)] += s.spec.bytes();
  }
  std::string out;
  for (int t = 1; t < kNumTiers; ++t) {
    if (!count[t]) continue;
    const bool load = op.kind == OpKind::TierPrefetch;
    const char* home = to_string(static_cast<Tier>(t));
    char line[128];
    std::snprintf(line, sizeof line, "%s%zu state(s) %.2f MiB %s->%s", out.empty() ? "" : "; ", count[t],
                  bytes[t] / 1048576.0, load ? home : "device", load ? "device" : home);
    out += line;
  }
  return out;
}

namespace {

// Whether the planner can serve every step of this layout (see place_and_plan_states). A step's
// moves depend only on what the device cache holds when it starts, so once a step starts from a
// cache seen before, the steps from there on repeat ones already planned. Steps that keep the
// cache may take long to repeat (the best-fit addresses of many small states drift): after
// kept_cache_steps without a repeat they are given up for steps that start from an empty cache,
// which repeat from the second step on. The steps tried shrink with the states, so that the
// check stays within about a second (OLMo-1B SOAP: some 2000 states, 25 steps).
int64_t kept_cache_steps(const TierLayout& layout) {
  return std::clamp<int64_t>(50000 / std::max<int64_t>(1, static_cast<int64_t>(layout.states.size())), 16, 1000);
}
enum class Planning { Serves, Fragmented, NoRepeat };

Planning try_plans(const TierLayout& layout) {
  if (!layout.moves()) return Planning::Serves;
  TierPlanner planner(layout);
  PlanBuilder builder;
  builder.add_contributor(&planner);
  Plan plan;
  std::set<std::vector<int64_t>> seen;
  std::vector<int64_t> at_start(layout.states.size());
  try {
    const int64_t steps = layout.fresh_each_step ? 3 : kept_cache_steps(layout);
    for (int64_t step = 1; step <= steps; ++step) {
      for (size_t id = 0; id < at_start.size(); ++id) at_start[id] = planner.planned_offset(static_cast<int>(id));
      if (!seen.insert(at_start).second) return Planning::Serves;
      builder.build({step, layout.num_layers(), 1, &layout.parts}, plan);
    }
  } catch (const Error&) {
    return Planning::Fragmented;   // the cache's free space was too fragmented for a unit in flight
  }
  return Planning::NoRepeat;
}

// try_plans, turning to fresh steps where kept caches do not repeat.
bool plans(TierLayout& layout) {
  const Planning p = try_plans(layout);
  if (p != Planning::NoRepeat) return p == Planning::Serves;
  layout.fresh_each_step = true;
  return try_plans(layout) == Planning::Serves;
}

}  // namespace

TierLayout place_and_plan_states(const std::vector<std::vector<StateSpec>>& specs, const TierOptions& options) {
  // Room beyond the units in flight that the cache may keep: 0, then a page, doubling, and
  // last all the device budget has beyond them (no hot state homed on the device).
  TierLayout layout = place_states(specs, options);   // too small even for the units in flight: throws
  if (plans(layout)) return layout;
  const size_t in_flight = layout.cache_need;
  const int per_part = layout.blocks_per_part;
  const uint64_t budget = options.budget[0];
  const size_t most_room = budget == kUnbounded ? 0 : budget > in_flight ? budget - in_flight : 0;
  size_t room = 0;
  while (room < most_room) {
    room = std::min(most_room, room ? 2 * room : kTierPage);
    TierLayout more = place_states(specs, options, room);
    if (more.blocks_per_part != per_part) break;   // the room took the cache to smaller parts
    if (plans(more)) return more;
  }
  // Fragmentation needs more device memory than the budget: find the least that does.
  auto works = [&](size_t r) {
    TierOptions more = options;
    more.budget[0] = in_flight + r;
    TierLayout layout_with_room = place_states(specs, more, r);
    return plans(layout_with_room);
  };
  size_t lo = room, hi = std::max(kTierPage, 2 * room);   // lo fails
  while (!works(hi)) lo = hi, hi *= 2;
  while (hi - lo > kTierPage) {                            // to a page
    const size_t mid = page_round(lo + (hi - lo) / 2);
    if (mid >= hi) break;
    (works(mid) ? hi : lo) = mid;
  }
  fail("runtime.tiers.device.bytes is ", options.budget[0], " bytes: the optimizer state of the ",
       std::min(layout.num_units(), options.prefetch_distance + 1), per_part ? " part(s) of layers" : " layer(s)",
       " in flight (runtime.tiers.prefetch_distance ", options.prefetch_distance, " + 1) is ", in_flight,
       " bytes, but its loads fragment the device cache so that it needs ", in_flight + hi,
       " bytes; raise the device budget to at least that or lower the prefetch distance");
}

}  // namespace asteria
