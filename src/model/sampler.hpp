#pragma once
// The next token from a position's logits (generation): greedy (temperature 0: the argmax, the
// lowest id among equals), or sampled from softmax(logits / temperature) restricted to the top_k
// largest and then to the smallest set of most likely tokens whose probability reaches top_p,
// renormalized. Only ids below `vocab` are candidates: the padding rows of the embedding
// (vocab_size .. embedding_size) are no tokens. The draws come from splitmix64 seeded by `seed`,
// so the same logits, settings and seed give the same tokens on every machine.
#include <cstdint>
#include <vector>

#include "data/splitmix64.hpp"

namespace asteria {

struct SamplingOptions {
  double temperature = 0;   // 0: greedy
  int top_k = 0;            // 0: every token
  double top_p = 1;         // 1: no nucleus cut
  uint64_t seed = 0;
};

class Sampler {
 public:
  // Throws asteria::Error naming a setting out of range (temperature < 0, top_k < 0, top_p
  // outside (0, 1]).
  explicit Sampler(const SamplingOptions& options);
  int32_t next(const float* logits, int vocab);

 private:
  SamplingOptions opt_;
  SplitMix64 rng_;
  std::vector<std::pair<double, int32_t>> candidates_;   // reused: no allocation per token
};

}  // namespace asteria
