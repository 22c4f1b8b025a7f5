#pragma once
// Fixed-length training instances over a token file, and fixed evaluation batches.
//
// An instance is seq_len + 1 consecutive tokens: inputs are the first seq_len, targets the last
// seq_len. Instance i starts at token i * seq_len, so there are (size - 1) / seq_len instances
// (a file shorter than seq_len + 1 tokens is an error naming the file and both lengths).
// The order of instances in an epoch is a permutation that is a pure function of (seed, epoch),
// the same on every machine (own Fisher-Yates over splitmix64, no std:: distribution).
#include <cstdint>
#include <vector>

#include "core/stateful.hpp"
#include "data/token_file.hpp"

namespace asteria {

// Where the loader is: the epoch and the number of instances of that epoch already served.
struct LoaderPosition {
  uint64_t epoch = 0;
  uint64_t index = 0;
  bool operator==(const LoaderPosition&) const = default;
};

// Permutation of [0, n) for (seed, epoch). Algorithm (fixed: changing it changes every run):
//   state = mix(mix(seed) ^ epoch), where mix is the splitmix64 output function of x + golden
//   gamma; perm = identity; for i = n-1 down to 1: j = uniform(i + 1); swap(perm[i], perm[j]);
//   uniform(m) draws splitmix64 outputs r until r < 2^64 - (2^64 mod m) and returns r mod m
//   (rejection, so no modulo bias).
std::vector<uint64_t> epoch_permutation(uint64_t n, uint64_t seed, uint64_t epoch);

// Number of instances of seq_len + 1 tokens in a file: (size - 1) / seq_len. An error naming the
// file and both lengths when the file has fewer than seq_len + 1 tokens or seq_len < 1.
uint64_t count_instances(const TokenFile& file, int seq_len);

// Holds a reference to the file: the file must outlive the loader.
// Stateful ("loader"): position [epoch, index], seed [high 32 bits, low 32 bits] (a record: a
// resumed run draws with its own seed), instances [per epoch] (a resume with another number,
// other data or sequence length, is refused).
class TrainLoader final : public Stateful {
 public:
  TrainLoader(const TokenFile& file, int seq_len, uint64_t seed);
  uint64_t num_instances() const { return num_instances_; }
  // Fills `batch` instances into inputs/targets (batch x seq_len each, row-major) and advances;
  // crosses into the next epoch (new permutation) when this one is exhausted. With `world`
  // ranks the next world x batch instances of the global order are the global micro-batch and
  // rank r takes instances r, r + world, ...: the position stays global (the same on every
  // rank), so the data of a step does not depend on the world size.
  void next_batch(int batch, int32_t* inputs, int32_t* targets, int rank = 0, int world = 1);
  LoaderPosition position() const { return pos_; }
  // Continues from a saved position; an index beyond the epoch is an error.
  void restore(const LoaderPosition& pos);

  std::string state_name() const override { return "loader"; }
  void save_state(StateWriter& out) override;
  void load_state(const StateReader& in) override;

 private:
  void load_instance(uint64_t instance, int32_t* inputs, int32_t* targets) const;
  const TokenFile& file_;
  int seq_len_;
  uint64_t seed_;
  uint64_t num_instances_;
  LoaderPosition pos_;
  std::vector<uint64_t> order_;   // permutation of the current epoch
};

// The first max_batches * batch instances of a file, in file order: the same batches at every
// evaluation. Fewer when the file is short (at least one full batch is required).
// Holds a reference to the file: the file must outlive it.
class EvalBatches {
 public:
  EvalBatches(const TokenFile& file, int seq_len, int batch, int max_batches);
  int count() const { return count_; }
  void get(int b, int32_t* inputs, int32_t* targets) const;

 private:
  const TokenFile& file_;
  int seq_len_;
  int batch_;
  int count_;
};

}  // namespace asteria
