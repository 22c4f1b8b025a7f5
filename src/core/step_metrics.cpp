#include "core/step_metrics.hpp"

#include <algorithm>

#include "core/error.hpp"

namespace asteria {

namespace {
nlohmann::json::json_pointer path(const std::string& key) { return nlohmann::json::json_pointer("/" + key); }
}  // namespace

StepMetrics::StepMetrics(int rank, int world) : rank_(rank), world_(world) { begin_step(); }

void StepMetrics::begin_step() {
  combined_.clear();
  values_.clear();
  locals_ = nlohmann::json::object();
  reduced_ = false;
}

void StepMetrics::local(const std::string& key, nlohmann::json value) { locals_[path(key)] = std::move(value); }

void StepMetrics::add(const std::string& key, Kind kind, double value, bool written) {
  ASTERIA_CHECK(!reduced_, "step metrics: '", key, "' recorded after the step's reduction");
  const size_t slot = values_.size();
  combined_.push_back({key, kind, written, slot});
  if (kind == Kind::Sum) {
    values_.push_back(value);
  } else {
    // Each rank fills its own slot; the sum over the ranks then holds every rank's value.
    values_.resize(slot + static_cast<size_t>(world_), 0.0);
    values_[slot + static_cast<size_t>(rank_)] = value;
  }
}

void StepMetrics::sum(const std::string& key, double value, bool written) { add(key, Kind::Sum, value, written); }
void StepMetrics::max(const std::string& key, double value) { add(key, Kind::Max, value, true); }
void StepMetrics::per_rank(const std::string& key, double value, bool written) { add(key, Kind::PerRank, value, written); }

void StepMetrics::reduce(const SumOverRanks& sum_over_ranks) {
  if (world_ > 1 && !values_.empty()) sum_over_ranks(values_.data(), values_.size());
  reduced_ = true;
}

const StepMetrics::Combined& StepMetrics::find(const std::string& key) const {
  ASTERIA_CHECK(reduced_, "step metrics: '", key, "' read before the step's reduction");
  for (const Combined& c : combined_)
    if (c.key == key) return c;
  fail("step metrics: no value '", key, "' was recorded this step");
}

double StepMetrics::total(const std::string& key) const {
  const Combined& c = find(key);
  if (c.kind == Kind::Sum) return values_[c.slot];
  const auto first = values_.begin() + static_cast<std::ptrdiff_t>(c.slot);
  ASTERIA_CHECK(c.kind == Kind::Max, "step metrics: '", key, "' is a per-rank list, not a total");
  return *std::max_element(first, first + world_);
}

std::vector<double> StepMetrics::by_rank(const std::string& key) const {
  const Combined& c = find(key);
  ASTERIA_CHECK(c.kind != Kind::Sum, "step metrics: '", key, "' is a sum, not a per-rank list");
  const auto first = values_.begin() + static_cast<std::ptrdiff_t>(c.slot);
  return std::vector<double>(first, first + world_);
}

nlohmann::json StepMetrics::record() const {
  nlohmann::json rec = locals_;
  if (!reduced_) return rec;
  for (const Combined& c : combined_) {
    if (!c.written) continue;
    if (c.kind == Kind::PerRank) rec[path(c.key)] = by_rank(c.key);
    else rec[path(c.key)] = total(c.key);
  }
  return rec;
}

}  // namespace asteria
