#pragma once
// One training step's metrics (a line of metrics.jsonl), recorded by the subsystems that produce
// them and combined over the ranks with one collective.
//
// Each subsystem records its own figures through a StepMetrics& (its record_metrics method);
// the run loop reduces them once and writes the record. Keys are JSON paths: "tier_bytes/host"
// is the field "host" of the object "tier_bytes".
//
// Kinds of value:
//   local(key, v)     this rank's value, not combined (the record written is rank 0's)
//   sum(key, v)       the sum over the ranks
//   max(key, v)       the largest over the ranks
//   per_rank(key, v)  every rank's value, as a list in rank order
// sum and per_rank may be recorded unwritten (written = false): figures the run loop reads after
// the reduction (total, by_rank) without putting them in the record.
//
// Contract: between begin_step and reduce, every rank records the same combined keys (sum, max,
// per_rank) in the same order, because the reduction is positional. What a subsystem records
// may depend on the configuration, never on the rank's data: a rank with nothing to report
// records 0. local values may be recorded at any time before record() and need no agreement.
// reduce() checks the contract: a hash of every rank's keys (with their kinds) is exchanged
// first, and a rank whose keys differ from rank 0's ends the step on every rank with an Error
// naming that rank, the first key that differs and its position, before the values are summed
// (a sum of misaligned slots would be wrong figures, or a collective of mismatched sizes).
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace asteria {

class StepMetrics {
 public:
  // Sums `count` doubles in place over the ranks (a no-op on one rank).
  using SumOverRanks = std::function<void(double* data, size_t count)>;

  StepMetrics(int rank, int world);

  // Starts a step: forgets the last one's values (keeps the memory).
  void begin_step();

  void local(const std::string& key, nlohmann::json value);
  void sum(const std::string& key, double value, bool written = true);
  void max(const std::string& key, double value);
  void per_rank(const std::string& key, double value, bool written = true);

  // The step's collective: every combined value over the ranks, after the check of the keys (a
  // small collective of `world` doubles; two more to name a mismatch).
  void reduce(const SumOverRanks& sum_over_ranks);

  // After reduce: a combined value by its key (a sum's or max's total; a per_rank's list).
  double total(const std::string& key) const;
  std::vector<double> by_rank(const std::string& key) const;

  // The step's record: the local values and the written combined ones (after reduce).
  nlohmann::json record() const;

 private:
  enum class Kind { Sum, Max, PerRank };
  struct Combined {
    std::string key;
    Kind kind;
    bool written;
    size_t slot;   // first of its slots in values_ (one for a sum, world for max and per_rank)
  };
  const Combined& find(const std::string& key) const;
  void add(const std::string& key, Kind kind, double value, bool written);
  // The keys' check: throws when a rank recorded other combined keys than rank 0.
  void check_same_keys(const SumOverRanks& sum_over_ranks);
  [[noreturn]] void name_mismatch(const SumOverRanks& sum_over_ranks, int rank);

  int rank_, world_;
  std::vector<Combined> combined_;
  std::vector<double> values_;
  std::vector<double> key_hashes_;   // the check's exchange (kept: no allocation per step)
  nlohmann::json locals_;
  bool reduced_ = false;
};

}  // namespace asteria
