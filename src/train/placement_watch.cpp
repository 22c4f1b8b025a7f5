#include "train/placement_watch.hpp"

#include <unistd.h>

#include <fstream>

namespace asteria {

namespace {

constexpr double kDownBelow = 0.95;   // of the planned limit
constexpr double kUpAbove = 1.10;

struct OwnUse {
  uint64_t resident = 0, address_space = 0;
};

// /proc/self/statm: size and resident, in pages.
OwnUse own_use(const std::string& root) {
  std::ifstream in(root + "/proc/self/statm");
  uint64_t size = 0, resident = 0;
  in >> size >> resident;
  const auto page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  return {resident * page, size * page};
}

bool same_tiers(const TiersConfig& a, const TiersConfig& b) {
  return a.device.bytes == b.device.bytes && a.host.bytes == b.host.bytes && a.prefetch_distance == b.prefetch_distance;
}

}  // namespace

MemoryWatch machine_memory_watch(int ranks_on_machine, MemoryProbe probe) {
  return [ranks_on_machine, probe]() {
    const MemoryLimits limits = find_memory_limits(probe);
    const OwnUse own = own_use(probe.root);
    MemoryReading r;
    for (const MemorySource& s : limits.sources) {
      const uint64_t mine = s.shared ? own.resident : own.address_space;
      const uint64_t limit = limits.per_process(s, ranks_on_machine) + mine;
      if (limit < r.limit) r = {limit, s.name + " (" + s.where + ") now, with this process's own " + human_bytes(static_cast<double>(mine))};
    }
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
