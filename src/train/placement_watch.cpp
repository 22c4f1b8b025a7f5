#include "train/placement_watch.hpp"

#include <algorithm>

namespace asteria {

namespace {

constexpr double kDownBelow = 0.95;   // of the planned limit
constexpr double kUpAbove = 1.10;
// The need that is pressed: 95% of the limit, halfway into the headroom the placement keeps (the
// estimate runs a few percent under the peak RSS, so a need at the limit is already too late).
constexpr double kPressed = 0.95;

}  // namespace

bool same_tiers(const TiersConfig& a, const TiersConfig& b) {
  return a.device.bytes == b.device.bytes && a.host.bytes == b.host.bytes && a.prefetch_distance == b.prefetch_distance;
}

MemoryWatch machine_memory_watch(int ranks_on_machine, MemoryProbe probe) {
  return [ranks_on_machine, probe]() {
    const MemoryLimits limits = find_memory_limits(probe);
    MemoryReading r;
    for (const MemorySource& s : limits.sources)
      if (const uint64_t limit = limits.per_process(s, ranks_on_machine) + s.own; limit < r.limit)
        r = {limit, s.name + " (" + s.where + ") now"};
    r.held = limits.resident;
    return r;
  };
}

PlacementWatch::PlacementWatch(const Placement& running, TiersConfig given, MemoryWatch watch, int world, int ranks_per_node,
                               uint64_t startup_limit)
    : given_(std::move(given)),
      watch_(std::move(watch)),
      world_(world),
      ranks_per_node_(ranks_per_node),
      planned_(static_cast<double>(std::max<uint64_t>(startup_limit, running.limit))),
      start_(planned_) {}

std::optional<Placement> PlacementWatch::check(const Placement& running) {
  const MemoryReading now = watch_();
  if (now.limit == UINT64_MAX) return std::nullopt;
  const double limit = static_cast<double>(now.limit);
  // What the process really holds per byte of its estimate (never less than 1).
  const double held_per_estimated = std::max(1.0, static_cast<double>(now.held) / running.need.total());
  const bool down = limit < kDownBelow * planned_ && held_per_estimated * running.need.total() > kPressed * limit;
  // Up once 10% above the planned limit, or, after a dip, back at the startup's (a dip of 5% that
  // has passed; without one, the limit's noise around the startup's is no reason).
  const double up_at = planned_ < start_ ? std::min(kUpAbove * planned_, start_) : kUpAbove * planned_;
  const bool up = limit >= up_at && limit > planned_ && !same_tiers(running.cfg.runtime.tiers, given_);
  if (!down && !up) return std::nullopt;
  planned_ = limit;
  const auto estimated_limit = static_cast<uint64_t>(limit / held_per_estimated);
  std::string source = now.source;
  if (now.held > 0) source += ", with the " + human_bytes(static_cast<double>(now.held)) + " this process holds";
  if (held_per_estimated > 1.0)
    source += "; planned as " + human_bytes(static_cast<double>(estimated_limit)) + " of estimate, since the process holds " +
              std::to_string(held_per_estimated).substr(0, 5) + "x its estimate";
  PlacementInputs in = placement_inputs(running.cfg, world_, ranks_per_node_, estimated_limit, source);
  // The GPU's free memory now leaves out what the run already holds there: its device tier, fixed
  // at startup, is not re-planned (host memory is what other processes take).
  in.device_free.reset();
  // The job store's room on the disk was the run's from the startup (its file, reused, may be
  // empty now but is planned to hold that much): free for this placement as it was for the first.
  if (in.disk_free) *in.disk_free += static_cast<uint64_t>(running.need.jobs_on_disk);
  Placement next = replace_tiers(running, given_, in);
  if (same_tiers(next.cfg.runtime.tiers, running.cfg.runtime.tiers) &&
      next.cfg.runtime.shadow.resident_jobs == running.cfg.runtime.shadow.resident_jobs)
    return std::nullopt;
  return next;
}

}  // namespace asteria
