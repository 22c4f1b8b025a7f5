#include "train/placement_watch.hpp"

namespace asteria {

namespace {

constexpr double kDownBelow = 0.95;   // of the planned limit
constexpr double kUpAbove = 1.10;

bool same_tiers(const TiersConfig& a, const TiersConfig& b) {
  return a.device.bytes == b.device.bytes && a.host.bytes == b.host.bytes && a.prefetch_distance == b.prefetch_distance;
}

}  // namespace

MemoryWatch machine_memory_watch(int ranks_on_machine, MemoryProbe probe) {
  return [ranks_on_machine, probe]() {
    const MemoryLimits limits = find_memory_limits(probe);
    MemoryReading r;
    for (const MemorySource& s : limits.sources)
      if (const uint64_t limit = limits.per_process(s, ranks_on_machine) + s.own; limit < r.limit)
        r = {limit, s.name + " (" + s.where + ") now, with the " + human_bytes(static_cast<double>(s.own)) + " this process holds"};
    return r;
  };
}

PlacementWatch::PlacementWatch(const Placement& running, TiersConfig given, MemoryWatch watch, int world, int ranks_per_node)
    : given_(std::move(given)),
      watch_(std::move(watch)),
      world_(world),
      ranks_per_node_(ranks_per_node),
      planned_(static_cast<double>(running.limit)) {}

std::optional<Placement> PlacementWatch::check(const Placement& running) {
  const MemoryReading now = watch_();
  if (now.limit == UINT64_MAX) return std::nullopt;
  const double limit = static_cast<double>(now.limit);
  const bool down = limit < kDownBelow * planned_ && running.need.total() > kPlacementFill * limit;
  const bool up = limit > kUpAbove * planned_ && !same_tiers(running.cfg.runtime.tiers, given_);
  if (!down && !up) return std::nullopt;
  planned_ = limit;
  Placement next = replace_tiers(running, given_,
                                 placement_inputs(running.cfg, world_, ranks_per_node_, now.limit, now.source));
  if (same_tiers(next.cfg.runtime.tiers, running.cfg.runtime.tiers)) return std::nullopt;
  ++replans_;
  return next;
}

}  // namespace asteria
