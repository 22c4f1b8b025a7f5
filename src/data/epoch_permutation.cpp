// The order of training instances in an epoch, and the instance count both loaders share.
#include <numeric>
#include <utility>

#include "core/error.hpp"
#include "data/loader.hpp"
#include "data/splitmix64.hpp"

namespace asteria {

std::vector<uint64_t> epoch_permutation(uint64_t n, uint64_t seed, uint64_t epoch) {
  // Hashing the seed before mixing in the epoch keeps (seed, epoch) and (seed ^ 1, epoch ^ 1)
  // and the like from sharing a stream.
  SplitMix64 rng(splitmix64_mix(splitmix64_mix(seed) ^ epoch));
  std::vector<uint64_t> perm(n);
  std::iota(perm.begin(), perm.end(), uint64_t{0});
  for (uint64_t i = n; i > 1; --i) {  // Fisher-Yates, from the back: swap i-1 with j in [0, i)
    const uint64_t j = rng.uniform(i);
    std::swap(perm[i - 1], perm[j]);
  }
  return perm;
}

uint64_t count_instances(const TokenFile& file, int seq_len) {
  ASTERIA_CHECK(seq_len >= 1, "sequence length must be at least 1, got ", seq_len);
  const uint64_t need = static_cast<uint64_t>(seq_len) + 1;
  if (file.size() < need)
    fail("token file ", file.path(), " has ", file.size(), " tokens, fewer than one instance of ",
         "sequence length ", seq_len, " needs (", need, " tokens)");
  return (file.size() - 1) / static_cast<uint64_t>(seq_len);
}

}  // namespace asteria
