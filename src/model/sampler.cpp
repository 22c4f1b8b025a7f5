#include "model/sampler.hpp"

#include <algorithm>
#include <cmath>

#include "core/error.hpp"

namespace asteria {

Sampler::Sampler(const SamplingOptions& options) : opt_(options), rng_(options.seed) {
  ASTERIA_CHECK(opt_.temperature >= 0 && std::isfinite(opt_.temperature), "sampling: temperature ", opt_.temperature,
                " must be >= 0 (0: greedy)");
  ASTERIA_CHECK(opt_.top_k >= 0, "sampling: top-k ", opt_.top_k, " must be >= 0 (0: every token)");
  ASTERIA_CHECK(opt_.top_p > 0 && opt_.top_p <= 1, "sampling: top-p ", opt_.top_p, " must be in (0, 1]");
}

int32_t Sampler::next(const float* logits, int vocab) {
  ASTERIA_ASSERT(vocab >= 1, "no candidates");
  if (opt_.temperature == 0) return static_cast<int32_t>(std::max_element(logits, logits + vocab) - logits);
  // Most likely first; ties by id so the order never depends on the sort.
  candidates_.clear();
  for (int i = 0; i < vocab; i++) candidates_.emplace_back(logits[i] / opt_.temperature, i);
  auto more_likely = [](const auto& a, const auto& b) { return a.first > b.first || (a.first == b.first && a.second < b.second); };
  size_t keep = opt_.top_k > 0 ? std::min<size_t>(static_cast<size_t>(opt_.top_k), candidates_.size()) : candidates_.size();
  std::partial_sort(candidates_.begin(), candidates_.begin() + static_cast<std::ptrdiff_t>(keep), candidates_.end(),
                    more_likely);
  candidates_.resize(keep);
  const double top = candidates_[0].first;
  double sum = 0;
  for (auto& c : candidates_) sum += (c.first = std::exp(c.first - top));
  // The nucleus: the fewest candidates whose probability reaches top_p.
  if (opt_.top_p < 1) {
    double mass = 0;
    size_t n = 0;
    while (n < candidates_.size() && mass < opt_.top_p * sum) mass += candidates_[n++].first;
    candidates_.resize(std::max<size_t>(n, 1));
    sum = mass;
  }
  // u in [0, 1) from the top 53 bits.
  const double u = static_cast<double>(rng_.next() >> 11) * 0x1.0p-53 * sum;
  double acc = 0;
  for (const auto& c : candidates_) {
    acc += c.first;
    if (u < acc) return c.second;
  }
  return candidates_.back().second;
}

}  // namespace asteria
