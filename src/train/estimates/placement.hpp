#pragma once
// runtime.placement auto (the default; docs/DESIGN.md "Tiers"): where a run's memory goes, chosen
// at startup from the memory the process may use (core/memory_limits.hpp) and the estimate of
// the plan (train/estimates/memory_estimate.hpp), so that a recipe runs unchanged on any machine
// with enough disk. What is chosen, in order of cost, each step taken only when the cheaper ones
// are not enough:
//   1. the tier budgets (runtime.tiers.device / host bytes) and the prefetch distance: as much
//      optimizer state in memory as fits beside everything else, the rest homed on the disk tier
//      (on the CPU backend the device tier is host memory, so the host tier gets nothing: a
//      state there would be copied into the device cache before each use for no gain; on CUDA
//      the device tier is bounded by the GPU's free memory, and what it cannot hold goes to
//      pinned host memory before the disk);
//   2. activation recompute (train.activation_recompute): every other block, then every block;
//   3. the LM head in chunks (model.head_chunk);
//   4. asteria mode: the shadow pipeline's refreshes in flight placed through the tiers (all but
//      the jobs in use at once parked on the disk tier: runtime.shadow.resident_jobs), then every
//      refresh synchronous (runtime.shadow.sync_steps = train.steps); runtime.shadow.delay is
//      lowered first instead of parking where resident_jobs is given as 0 (all in memory);
//   5. a smaller micro-batch with more accumulation (train.micro_batch x train.grad_accum, the
//      global batch, never changes);
//   6. one CPU process: the blocks' parameters on the disk tier (runtime.tiers.params.home disk,
//      fsdp/param_offload.hpp), read a layer at a time before each use and written back after
//      the optimizer step: the costliest (the blocks' bytes read twice per micro-batch and once
//      more, and written once, per step), so taken last.
// Steps 1, 2 and 6 change no bit of the results (placement and recompute never change the math);
// 3 does once a micro-batch has more rows than a chunk (the head's weight gradient is summed
// chunk by chunk), 4 does unless it only parks jobs, 5 always does; each part says so. A key the config gives explicitly is never changed (it overrides the
// choice); runtime.placement manual changes nothing. What cannot fit even with all optimizer
// state on disk and every step taken is refused with the bytes.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/config.hpp"
#include "train/estimates/memory_estimate.hpp"

namespace asteria {

// The share of the limit a placement plans to fill: the estimate is within a few percent of the
// peak RSS (bench/results/olmo-1b-24g: 1.02), and the process needs room it does not count
// (libraries, the allocator's slack, the disk tier's bounce buffers).
constexpr double kPlacementFill = 0.9;

struct PlacementPart {
  std::string key;      // the config key (or section) chosen
  std::string value;    // what it was set to
  std::string reason;   // why, in words
  bool changes_math = false;   // the run's arithmetic differs (another order of sums, ...)
};

struct Placement {
  Config cfg;                        // the config the run uses (cfg with the choice applied)
  std::vector<PlacementPart> parts;  // what was chosen, cheapest first; empty: nothing changed
  MemoryEstimate need;               // cfg's estimate
  uint64_t limit = 0;                // the memory limit planned against (UINT64_MAX: none)
  std::string limit_source;
  bool changes_math = false;         // a part that changes the arithmetic was taken
  bool fits = true;                  // false only from replace_tiers: not even all on disk fits
  // One line per part, for the startup and --dry-run.
  std::string describe() const;
};

struct PlacementInputs {
  uint64_t limit = UINT64_MAX;          // per process
  std::string limit_source;
  int world = 1;                        // the launch's ranks (parameters on disk: one only)
  // The process's (or largest rank's) need; Quick while searching budgets, Planned to confirm.
  std::function<MemoryEstimate(const Config&, TierCheck)> estimate;
  std::optional<uint64_t> disk_free;    // free bytes where the disk tier's file goes
  // runtime.backend cuda: the GPU's free bytes (cudaMemGetInfo, before the run allocates) and
  // what the run holds there (device_memory). Unset on the CPU, or where the device cannot be
  // read (the GPU run's startup check then says so).
  std::optional<uint64_t> device_free;
  std::function<MemoryEstimate(const Config&, TierCheck)> device_estimate;
};

// The choice for `cfg` against `in` (a pure function of its inputs: tests inject the limit).
// Throws asteria::Error naming the config, the bytes needed and the limit when nothing fits.
Placement choose_placement(const Config& cfg, const PlacementInputs& in);

// The least runtime.shadow.resident_jobs that parks no job in use: the jobs computed at once
// (compute threads on the compute lane, else the workers) and a snapshot's beside them.
int least_resident_jobs(const Config& cfg);

// A running process placed again (train/placement_watch.hpp): only the tier budgets and the
// prefetch distance are chosen again (the parameters stay where the run keeps them), for in.limit, starting from `given` (the config's own
// runtime.tiers), and where they are not enough the shadow pipeline's refreshes in flight are
// parked on the disk tier as well (runtime.shadow.resident_jobs, unless given); everything else
// of `running` is built and stays, and none of it changes the math. Never fails for want of
// memory: when not even all optimizer state on the disk tier fits, that is the choice and
// `fits` is false.
Placement replace_tiers(const Placement& running, const TiersConfig& given, const PlacementInputs& in);

// The inputs of a placement for a process of a launch of `world` ranks, `ranks_per_node` on its
// machine, against `limit` (from `limit_source`).
PlacementInputs placement_inputs(const Config& cfg, int world, int ranks_per_node, uint64_t limit, std::string limit_source);

// The choice for a process of a launch of `world` ranks, `ranks_per_node` on its machine, with
// the memory limit of this machine (runtime.memory_limit) or `limit_override` when given (the
// smallest over the ranks' machines, so that every rank chooses the same).
Placement place_run(const Config& cfg, int world, int ranks_per_node, std::optional<uint64_t> limit_override = {});
// The same for planning (--dry-run, --print-plan): the launch of distributed.world_size ranks
// (one when 0), distributed.ranks_per_node to a machine (all of them when 0). A launch of
// world_size ranks is planned for other machines: placed only against an explicit
// runtime.memory_limit.
Placement place_for_planning(const Config& cfg);
// For run_info.json: the limit, its source, the need, and each part with its reason.
nlohmann::json placement_json(const Placement& p);

}  // namespace asteria
