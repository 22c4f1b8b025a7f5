#pragma once
// The tiered state manager's ops in each step's plan (docs/DESIGN.md "The plan": tiers prefetch and
// evict, placed by next use).
//
// The optimizer steps the tier layout's units (whole layers, or parts of them) in a fixed order
// every step (uses 0 .. U-1: layers L-1 .. 0, each layer's parts in order), so the next use of
// every state is known when the plan is built. The planner simulates the device tier's cache
// region at plan time and decides every move and every address:
//   - the states of use i are prefetched d = prefetch_distance uses ahead: at the start of the
//     step (during forward/backward) for i < d, else right before use i - d;
//   - a prefetch that finds the cache full first evicts the resident state whose next use is
//     furthest away (Belady's choice, optimal for a known sequence), never one needed by a use
//     up to i (those are in flight);
//   - where the units are parts of layers (the cache holds little beyond the units in flight),
//     or where steps that keep the cache do not repeat their moves (the best-fit addresses of
//     many small states drift, so that the check below could not show that every step plans),
//     every step starts from an empty cache (TierLayout::fresh_each_step): the states left from
//     the step before (its last units', used last in this step too) are written back first. It
//     costs nothing where those states would be evicted before their next use anyway, else a
//     few reloads; otherwise the cache is kept across steps, and the loads are Belady's fewest;
//   - tier_evict (staging) writes the victims back to their home tier, tier_prefetch (staging)
//     loads the unit's states, and tier_wait (compute) before the unit's optim_step waits for
//     the load: its wait is the tier stall.
// The executor runs the staging ops in plan order, so the tier manager (tier_manager.hpp)
// replays exactly the planned moves and the device tier never holds more than its budget.
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/offset_allocator.hpp"
#include "runtime/plan_builder.hpp"
#include "runtime/tier_layout.hpp"

namespace asteria {

struct TierMove {
  enum class Kind : uint8_t { Load, Evict };
  Kind kind = Kind::Load;
  int state = -1;
  size_t device_offset = 0;   // in the device arena
};

class TierPlanner final : public PlanContributor {
 public:
  explicit TierPlanner(const TierLayout& layout);
  // Starts over from `layout` as it is now (the same object, changed by TierManager::relayout):
  // the device cache empty, every state at its home.
  void reset();

  void micro_begin(PlanBuilder& b, int micro) override;
  void optimizer_part(PlanBuilder& b, int layer, BlockRange part) override;

  const TierLayout& layout() const { return layout_; }
  // The moves of a tier_evict / tier_prefetch op (its tag) of the plan built last.
  const std::vector<TierMove>& moves(int64_t tag) const { return moves_[static_cast<size_t>(tag)]; }
  // What a tier op moves, in words (for --print-plan); "" for other ops.
  std::string describe(const Op& op) const;
  // Device-arena offset each state will have once the plan built last has run (-1: not on the
  // device); bytes of the cache region in use then.
  int64_t planned_offset(int state) const { return offset_[state]; }
  size_t planned_cache_bytes() const { return cache_.used(); }

 private:
  // Makes the states of use `use` device-resident, evicting as needed; `current` is the first
  // use of this step that has not finished (it may be running while the moves run).
  void ensure(PlanBuilder& b, int use, int current);
  int pick_victim(int use, int current) const;
  // Frees state `id`'s cache slot, its write-back a move of `list`.
  void evict_state(int id, std::vector<TierMove>& list);
  // Evicts every state in the cache (a tier_evict op; -1 when there is none).
  int flush(PlanBuilder& b);
  std::vector<TierMove>& next_move_list();

  const TierLayout& layout_;
  int num_uses_ = 0;                      // the layout's units
  int distance_ = 0;
  OffsetAllocator cache_;                 // the cache region, offsets from its start
  std::vector<int64_t> offset_;           // per state: device-arena offset, -1 when not on the device
  std::vector<std::vector<TierMove>> moves_;   // per tier op of the current plan (capacity reused)
  size_t moves_used_ = 0;
  std::vector<int> load_op_;              // per use of the current plan: its tier_prefetch op, or -1
  int flush_op_ = -1;                     // the current plan's flush at its start, or -1
  std::vector<std::vector<int>> uses_of_;   // per state: the uses that need it, ascending
  std::vector<int> need_;                 // ensure()'s scratch
  std::vector<size_t> at_;
};

// place_states, checked by planning steps until they repeat (a step's moves depend only on what
// the cache holds when it starts): when the cache region's free space is too fragmented to load
// the units in flight, places again keeping more of the device budget for the cache (slack
// doubling from one page, while the units stay as large) until every step plans, or fails with
// the device bytes that would do.
TierLayout place_and_plan_states(const std::vector<std::vector<StateSpec>>& specs, const TierOptions& options);

}  // namespace asteria
