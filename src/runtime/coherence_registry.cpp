#include "runtime/coherence_registry.hpp"

#include <algorithm>
#include <utility>

#include "core/error.hpp"

namespace asteria {

CoherenceRegistry::CoherenceRegistry(CoherenceRule rule, int blocks) : rule_(rule), versions_(static_cast<size_t>(blocks)) {
  ASTERIA_ASSERT(rule.staleness >= 1 && rule.tolerance >= 0);
  for (int b = 0; b < blocks; ++b) names_.push_back(std::to_string(b));
}

void CoherenceRegistry::name_blocks(std::vector<std::string> names) {
  ASTERIA_ASSERT(names.size() == versions_.size(), names.size(), " names for ", versions_.size(), " blocks");
  names_ = std::move(names);
}

void CoherenceRegistry::save_state(StateWriter& out) {
  for (size_t b = 0; b < versions_.size(); ++b) {
    const BlockVersions& v = versions_[b];
    out.put(names_[b], {static_cast<double>(v.adopted), static_cast<double>(v.newest), static_cast<double>(v.adopted_step)});
  }
}

void CoherenceRegistry::load_state(const StateReader& in) {
  std::vector<BlockVersions> loaded = versions_;   // everything read before the registry changes
  for (size_t b = 0; b < versions_.size(); ++b) {
    if (!in.has(names_[b])) continue;
    const std::vector<int64_t> v = in.ints(names_[b], 3);
    loaded[b] = {v[0], v[1], v[2]};
  }
  versions_ = std::move(loaded);
}

bool CoherenceRegistry::decide(int b, double distance) const {
  const BlockVersions& v = versions_.at(static_cast<size_t>(b));
  // A block's first version always ships: until then every replica runs on the initial state
  // (SOAP: the identity basis), which S versions of staleness would keep for S refresh periods.
  if (v.adopted == 0) return true;
  return rule_.ship(v.newest + 1 - v.adopted, distance);
}

void CoherenceRegistry::record(int b, int64_t from_step, bool shipped) {
  BlockVersions& v = versions_.at(static_cast<size_t>(b));
  ++v.newest;
  if (!shipped) {
    ++skipped_;
    return;
  }
  v.adopted = v.newest;
  v.adopted_step = from_step;
  ++shipped_;
}

bool CoherenceRegistry::computed(int b, int64_t from_step, double distance) {
  const bool ship = decide(b, distance);
  record(b, from_step, ship);
  return ship;
}

Staleness CoherenceRegistry::staleness(int64_t step) const {
  Staleness s;
  if (versions_.empty()) return s;
  for (const BlockVersions& v : versions_) {
    s.max_versions = std::max(s.max_versions, v.newest - v.adopted);
    s.mean_versions += static_cast<double>(v.newest - v.adopted);
    s.max_steps = std::max(s.max_steps, step - v.adopted_step);
    s.mean_steps += static_cast<double>(step - v.adopted_step);
  }
  s.mean_versions /= static_cast<double>(versions_.size());
  s.mean_steps /= static_cast<double>(versions_.size());
  return s;
}

int64_t CoherenceRegistry::take_shipped() { return std::exchange(shipped_, 0); }
int64_t CoherenceRegistry::take_skipped() { return std::exchange(skipped_, 0); }

}  // namespace asteria
