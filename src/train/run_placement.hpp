#pragma once
// runtime.placement for one run (train/estimates/placement.hpp chooses; docs/training.md
// "Placement"): the startup's choice, the same on every rank (planned against the smallest of
// their machines' limits), applied to the run's config and said by rank 0; and with
// runtime.placement and runtime.memory_limit auto, its changes between steps when the memory the
// run may use falls or comes back (train/placement_watch.hpp): the optimizer state moved between
// tiers and the shadow pipeline's jobs parked, never a bit of the arithmetic changed.
#include <cstdint>
#include <memory>

#include "comm/topology.hpp"
#include "config/config.hpp"
#include "core/step_metrics.hpp"
#include "train/estimates/placement.hpp"
#include "train/placement_watch.hpp"

namespace asteria {

class Communicator;
class Sharding;
class ShadowPipeline;
class TierManager;

class RunPlacement {
 public:
  // Chooses the placement of `cfg` (a collective over `comm`) and applies it to `cfg`. memory:
  // the limit as read at startup and every step boundary (empty: the machine's; tests inject one).
  RunPlacement(Config& cfg, Communicator& comm, const Topology& topo, MemoryWatch memory);
  ~RunPlacement();

  const Placement& placement() const { return placement_; }

  // Between steps, before `step`'s plan is built: when the limit moved past the watch's
  // hysteresis, the tiers laid out again (cfg's runtime.tiers and runtime.shadow.resident_jobs
  // follow). A disk without room for the move leaves the placement as it is, said once per
  // attempt. Nothing to do without a watch.
  void adapt(int64_t step, Config& cfg, TierManager& tiers, const Sharding& sharding, ShadowPipeline* shadow);

  // placement_replans (and placement_replan_s at a step that re-placed), when watched.
  void record_metrics(StepMetrics& metrics);

 private:
  Placement placement_;
  int rank_, world_;
  std::unique_ptr<PlacementWatch> watch_;   // placement and memory_limit auto
  int replans_ = 0;
  double replan_s_ = 0;   // the last re-placement's, until recorded
};

}  // namespace asteria
