#pragma once
// splitmix64 (Steele, Lea, Flood 2014; the generator Java's SplittableRandom uses): a 64-bit
// counter advanced by the golden gamma, scrambled by a fixed output function. Chosen for data
// order because it is a few lines, fully specified, and gives the same numbers on every
// platform and compiler, which no std:: distribution promises.
#include <cstdint>

namespace asteria {

inline constexpr uint64_t kGoldenGamma = 0x9E3779B97F4A7C15ull;

// The splitmix64 output function applied to x + gamma: a good 64-bit hash of x.
constexpr uint64_t splitmix64_mix(uint64_t x) {
  uint64_t z = x + kGoldenGamma;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

class SplitMix64 {
 public:
  explicit constexpr SplitMix64(uint64_t state) : state_(state) {}
  constexpr uint64_t next() {
    const uint64_t out = splitmix64_mix(state_);
    state_ += kGoldenGamma;
    return out;
  }
  // Uniform in [0, m), m >= 1, by rejection: no modulo bias.
  constexpr uint64_t uniform(uint64_t m) {
    // 2^64 mod m, computed in 64 bits; draws at or above 2^64 - that are rejected.
    const uint64_t rejected = (0 - m) % m;
    uint64_t r = next();
    while (r > ~uint64_t{0} - rejected) r = next();
    return r % m;
  }

 private:
  uint64_t state_;
};

}  // namespace asteria
