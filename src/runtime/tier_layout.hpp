#pragma once
// Where every optimizer state tensor lives (docs/DESIGN.md "Tiers"): its home tier, chosen once at
// startup from its lifecycle class and the tier budgets.
//
//   hot  (factor statistics, moments: written every step)  -> device, while it fits
//   warm (inverse roots, eigenbases: written every F steps) -> host
//   whatever does not fit its tier (cold)                   -> the next tier down, then disk
//
// A state whose home is not the device is brought into the device tier's cache region before
// the optimizer step that uses it and written back after (runtime/tier_planner.hpp). The states
// move in units, one optimizer step each: a whole layer's, or, where the device budget cannot
// hold prefetch_distance + 1 whole layers, parts of layers (a part: the layer-wide states, i.e.
// the 1-D parameters' moments, with the states of a run of its preconditioner blocks and the
// update compensation's bands of those blocks; the largest parts that fit, halving from half the largest layer's
// blocks down to TierOptions::min_blocks_per_part). The cache region must hold the states of
// prefetch_distance + 1 consecutive units of the optimizer order (the units in flight);
// placement keeps that much of the device budget free.
// Every state occupies whole pages (kTierPage) in every tier, so that disk I/O can be direct.
#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "optim/state_tensor.hpp"
#include "optim/block_range.hpp"

namespace asteria {

enum class Tier : uint8_t { Device, Host, Disk };
constexpr int kNumTiers = 3;
const char* to_string(Tier);

constexpr uint64_t kUnbounded = std::numeric_limits<uint64_t>::max();
constexpr size_t kTierPage = 4096;
inline size_t page_round(size_t bytes) { return (bytes + kTierPage - 1) / kTierPage * kTierPage; }
// A state's footprint in the disk file: a header page (checksum) and its data pages.
inline size_t disk_slot_bytes(size_t bytes) { return kTierPage + page_round(bytes); }

struct TierOptions {
  std::array<uint64_t, kNumTiers> budget{kUnbounded, kUnbounded, kUnbounded};
  int prefetch_distance = 2;   // units of the optimizer order prefetched ahead of their use
  // The fewest blocks in a part of a layer: a part's blocks step in parallel, one per thread on
  // the CPU (train/tier_config.cpp sets the trainer's threads there, 1 on CUDA).
  int min_blocks_per_part = 1;
};

// The states one optimizer step needs on the device (the step's `blocks` of `layer`).
struct TierUnit {
  int layer = 0;
  BlockRange blocks;         // whole, or a part
  std::vector<int> states;   // state ids: the layer's all, or its layer-wide ones and the part's
};

struct TierState {
  StateSpec spec;
  int layer = 0;
  size_t slot = 0;          // page-rounded bytes in the device and host tiers
  Tier home = Tier::Device;
  size_t home_offset = 0;   // in the home tier's arena (disk: in the file, header page first)
};

struct TierLayout {
  TierOptions options;
  std::vector<TierState> states;            // layer-major, Optimizer::layer_states order
  std::vector<std::vector<int>> by_layer;   // state ids of each layer
  size_t device_home_bytes = 0;             // [0, device_home_bytes) of the device arena
  size_t device_cache_bytes = 0;            // the cache region after it (0: nothing visits)
  size_t host_bytes = 0;
  size_t disk_bytes = 0;                    // file size, header pages included
  // Slot bytes per lifecycle class and home tier.
  std::array<std::array<size_t, kNumTiers>, kNumStateClasses> by_class{};
  int blocks_per_part = 0;                  // 0: every unit is a whole layer
  // Every step's plan starts from an empty cache (runtime/tier_planner.hpp): with parts, and
  // where the moves of steps that keep the cache do not repeat (place_and_plan_states).
  bool fresh_each_step = false;
  std::vector<TierUnit> units;              // in the optimizer's order of use
  std::vector<std::vector<BlockRange>> parts;   // per layer: its units' blocks, in order
  std::vector<int> first_unit;              // per layer: the index of its first unit
  size_t cache_need = 0;                    // the units in flight's bytes when every state visits

  int num_layers() const { return static_cast<int>(by_layer.size()); }
  int num_units() const { return static_cast<int>(units.size()); }
  // The unit of layer `layer` whose blocks start at `first` (BlockRange::first).
  int unit_of(int layer, int first) const;
  bool moves() const { return device_cache_bytes > 0; }
  // The --dry-run report: budgets, and bytes per class per tier.
  std::string describe() const;
};

// The optimizer order of a step: layers L-1 .. 0 (PlanBuilder's optimizer walk).
inline int layer_at_use(int num_layers, int use) { return num_layers - 1 - use; }

// Bytes the device cache needs for the units in flight when every state visits it: the most,
// over prefetch_distance + 1 consecutive units of the optimizer order, of their page-rounded
// state; units of whole layers (blocks_per_part 0) or parts of at most blocks_per_part blocks.
size_t tier_cache_need(const std::vector<std::vector<StateSpec>>& specs, int prefetch_distance,
                       int blocks_per_part = 0);

// Places the states (specs[l]: layer l's states). Throws asteria::Error when the budgets
// cannot hold them, saying how many bytes each tier would need. cache_slack: device bytes the
// cache region keeps beyond what the layers in flight need (room lost to fragmentation; see
// place_and_plan_states in tier_planner.hpp, which chooses it).
TierLayout place_states(const std::vector<std::vector<StateSpec>>& specs, const TierOptions& options,
                        size_t cache_slack = 0);

}  // namespace asteria
