#include "runtime/coherence_registry.hpp"

#include <algorithm>
#include <utility>

#include "core/error.hpp"

namespace asteria {

CoherenceRegistry::CoherenceRegistry(CoherenceRule rule, int blocks) : rule_(rule), versions_(static_cast<size_t>(blocks)) {
  ASTERIA_ASSERT(rule.staleness >= 1 && rule.tolerance >= 0);
}

bool CoherenceRegistry::computed(int b, int64_t from_step, double distance) {
  BlockVersions& v = versions_.at(static_cast<size_t>(b));
  ++v.newest;
  if (!rule_.ship(v.newest - v.adopted, distance)) {
    ++skipped_;
    return false;
  }
  v.adopted = v.newest;
  v.adopted_step = from_step;
  ++shipped_;
  return true;
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

std::vector<double> CoherenceRegistry::save() const {
  std::vector<double> out;
  out.reserve(3 * versions_.size());
  for (const BlockVersions& v : versions_) {
    out.push_back(static_cast<double>(v.adopted));
    out.push_back(static_cast<double>(v.newest));
    out.push_back(static_cast<double>(v.adopted_step));
  }
  return out;
}

void CoherenceRegistry::restore(const std::vector<double>& values) {
  ASTERIA_CHECK(values.size() == 3 * versions_.size(), "the coherence registry holds ", values.size() / 3,
                " blocks, this run has ", versions_.size());
  for (size_t b = 0; b < versions_.size(); ++b)
    versions_[b] = {static_cast<int64_t>(values[3 * b]), static_cast<int64_t>(values[3 * b + 1]),
                    static_cast<int64_t>(values[3 * b + 2])};
}

}  // namespace asteria
