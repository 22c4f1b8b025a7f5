#include "core/step_metrics.hpp"

#include <xxhash.h>

#include <algorithm>

#include "core/error.hpp"

namespace asteria {

namespace {
nlohmann::json::json_pointer path(const std::string& key) { return nlohmann::json::json_pointer("/" + key); }

// 52 bits of a hash: exact in a double, so that each rank's slot survives the sum over the ranks.
double hash52(uint64_t h) { return static_cast<double>(h & ((uint64_t{1} << 52) - 1)); }

// A combined value's identity: its key, its kind and whether it is written.
uint64_t key_hash(const std::string& key, int kind, bool written, uint64_t seed) {
  const std::string id = key + '\0' + static_cast<char>('0' + kind) + (written ? 'w' : 'u');
  return XXH3_64bits_withSeed(id.data(), id.size(), seed);
}
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
  if (world_ > 1) {
    check_same_keys(sum_over_ranks);
    if (!values_.empty()) sum_over_ranks(values_.data(), values_.size());
  }
  reduced_ = true;
}

void StepMetrics::check_same_keys(const SumOverRanks& sum_over_ranks) {
  // The hash chains the keys in order, so that the same keys in another order differ too.
  uint64_t h = combined_.size();
  for (const Combined& c : combined_) h = key_hash(c.key, static_cast<int>(c.kind), c.written, h);
  key_hashes_.assign(static_cast<size_t>(world_), 0.0);
  key_hashes_[static_cast<size_t>(rank_)] = hash52(h);
  sum_over_ranks(key_hashes_.data(), key_hashes_.size());
  // Every rank sees the same hashes, so every rank takes the same branch (and collectives).
  for (int r = 1; r < world_; ++r)
    if (key_hashes_[static_cast<size_t>(r)] != key_hashes_[0]) name_mismatch(sum_over_ranks, r);
}

void StepMetrics::name_mismatch(const SumOverRanks& sum_over_ranks, int rank) {
  const size_t w = static_cast<size_t>(world_), me = static_cast<size_t>(rank_), other = rank_ == 0 ? rank : 0;
  // Every rank's count of keys, then each key's hash by position (0: none there), up to the
  // longest list.
  std::vector<double> counts(w, 0.0);
  counts[me] = static_cast<double>(combined_.size());
  sum_over_ranks(counts.data(), counts.size());
  const size_t longest = static_cast<size_t>(*std::max_element(counts.begin(), counts.end()));
  std::vector<double> keys(longest * w, 0.0);
  for (size_t i = 0; i < combined_.size(); ++i) {
    const Combined& c = combined_[i];
    keys[i * w + me] = hash52(key_hash(c.key, static_cast<int>(c.kind), c.written, 0)) + 1;
  }
  sum_over_ranks(keys.data(), keys.size());
  size_t at = 0;   // the first position where `rank`'s key differs from rank 0's
  while (at < longest && keys[at * w] == keys[at * w + static_cast<size_t>(rank)]) ++at;
  // Each of the two ranks names what it knows: its own key there (the other's is in its message).
  if (rank_ == rank || rank_ == 0) {
    const std::string mine = at < combined_.size() ? "'" + combined_[at].key + "'" : "nothing";
    fail("step metrics: rank ", rank, " recorded other combined keys than rank 0 (every rank records the same keys in the same "
         "order): at position ", at, " this rank (", rank_, ") recorded ", mine, " (", combined_.size(), " keys in all; rank ", other,
         ": ", static_cast<size_t>(counts[other]), ")");
  }
  fail("step metrics: rank ", rank, " recorded other combined keys than rank 0 from position ", at,
       " (those two ranks' messages name the keys)");
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
