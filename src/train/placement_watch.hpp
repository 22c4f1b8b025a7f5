#pragma once
// runtime.placement auto while a run goes on (docs/training.md "Placement"): memory that another
// process takes, or gives back, after startup. At every step boundary the memory limit is read
// again (a MemoryWatch); when it has fallen so far that the running placement's need is above
// 95% of it, the tier budgets are chosen again (more optimizer state on the disk
// tier), and when it has come back so that more of the state fits in memory, again the other
// way (train/estimates/placement.hpp replace_tiers; where the tiers are not enough, the shadow
// pipeline's refreshes in flight are parked on the disk tier too, and stay parked when the
// memory comes back). Only where state lives changes, never the math: a pressured run's
// parameters are bit-identical to an unpressured one's. The trainer moves the state
// (runtime/tier_manager.hpp relayout, ShadowPipeline::set_resident_jobs) and counts the re-plans
// (placement_replans).
//
// The estimate a placement is planned with runs under what the process really holds (by 4% at
// OLMo-1B, by a quarter for small models, whose libraries and buffers weigh more): a running
// process knows better. Its need is taken as the larger of the estimate and what it holds, and
// the tiers are chosen against the limit scaled down by the same ratio, so that what the new
// placement really holds fits.
//
// Hysteresis, so that the limit's noise moves no state: down only once the limit is 5% below
// the one the running placement was planned against, up only once it is 10% above it or, after
// a dip, back at the startup's limit (and only when the running tiers hold less in memory than the
// config's own).
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "core/memory_limits.hpp"
#include "train/estimates/placement.hpp"

namespace asteria {

struct MemoryReading {
  uint64_t limit = UINT64_MAX;   // what this process may use now, what it holds itself counted in
  std::string source;
  uint64_t held = 0;             // what it holds now (VmRSS); 0: unknown
};
using MemoryWatch = std::function<MemoryReading()>;

// The machine's limit now: each source of core/memory_limits.hpp (shared ones divided among
// `ranks_on_machine`) plus what this process holds of what the source counts, the smallest; held:
// the process's VmRSS. The startup placement plans the run beside what the process held then
// (limit - held: its code and libraries are in no estimate).
MemoryWatch machine_memory_watch(int ranks_on_machine, MemoryProbe probe = {});

// Whether two tier settings place the state alike (budgets and prefetch distance).
bool same_tiers(const TiersConfig& a, const TiersConfig& b);

class PlacementWatch {
 public:
  // given: the config's own runtime.tiers; world, ranks_per_node: as the startup placement's;
  // startup_limit: the startup's reading of the watch (what the process holds counted in, as every
  // later reading counts it; the startup placement planned without what it held then).
  PlacementWatch(const Placement& running, TiersConfig given, MemoryWatch watch, int world, int ranks_per_node,
                 uint64_t startup_limit);

  // Between steps: the placement the run should switch to, or nothing. Asked once per change of
  // the limit past the hysteresis: a switch the caller cannot make is not asked again until the
  // limit changes that much once more.
  std::optional<Placement> check(const Placement& running);

 private:
  TiersConfig given_;
  MemoryWatch watch_;
  int world_, ranks_per_node_;
  double planned_;   // the limit the running tiers were chosen for
  double start_;     // the startup's
};

}  // namespace asteria
