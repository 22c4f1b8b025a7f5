// model/sampler.hpp: greedy is the argmax; a seed gives the same draws; top-k and top-p keep the
// candidates they say; the draws follow softmax(logits / T) (a chi-square test over many draws);
// the padding rows beyond the vocabulary are never drawn; bad settings are refused.
#include "model/sampler.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/error.hpp"

namespace asteria {
namespace {

const std::vector<float> kLogits = {1.0f, 3.0f, 2.5f, -1.0f, 0.0f, 2.9f, 9.0f /* padding row */};
constexpr int kVocab = 6;

std::vector<int32_t> draws(SamplingOptions o, int n) {
  Sampler s(o);
  std::vector<int32_t> out;
  for (int i = 0; i < n; i++) out.push_back(s.next(kLogits.data(), kVocab));
  return out;
}

TEST(Sampler, GreedyIsTheArgmaxAmongTheVocabulary) {
  EXPECT_EQ(draws({}, 3), (std::vector<int32_t>{1, 1, 1}));   // row 6 is padding: never a token
}

TEST(Sampler, TheSameSeedGivesTheSameTokens) {
  SamplingOptions o{1.0, 0, 1.0, 42};
  EXPECT_EQ(draws(o, 200), draws(o, 200));
  SamplingOptions other = o;
  other.seed = 43;
  EXPECT_NE(draws(o, 200), draws(other, 200));
}

TEST(Sampler, TopKAndTopPKeepTheirCandidates) {
  for (int32_t t : draws({1.0, 2, 1.0, 1}, 300)) EXPECT_TRUE(t == 1 || t == 5) << t;   // 3.0 and 2.9
  for (int32_t t : draws({1.0, 1, 1.0, 2}, 50)) EXPECT_EQ(t, 1);
  // p = 0.3: the most likely token alone already reaches it (its probability is 0.37).
  for (int32_t t : draws({1.0, 0, 0.3, 3}, 50)) EXPECT_EQ(t, 1);
  // p = 0.6: tokens 1 and 5 (0.37 + 0.33 >= 0.6), never 2 (third).
  for (int32_t t : draws({1.0, 0, 0.6, 4}, 300)) EXPECT_TRUE(t == 1 || t == 5) << t;
}

TEST(Sampler, DrawsFollowTheTemperedSoftmax) {
  for (double temperature : {0.7, 1.0, 2.0}) {
    const int n = 60000;
    std::vector<int> count(kVocab, 0);
    for (int32_t t : draws({temperature, 0, 1.0, 7}, n)) count[t]++;
    double z = 0;
    for (int i = 0; i < kVocab; i++) z += std::exp(kLogits[i] / temperature);
    double chi2 = 0;
    for (int i = 0; i < kVocab; i++) {
      const double expected = n * std::exp(kLogits[i] / temperature) / z;
      chi2 += (count[i] - expected) * (count[i] - expected) / expected;
    }
    EXPECT_LT(chi2, 20.5) << "temperature " << temperature;   // 5 degrees of freedom: p = 0.001
  }
}

TEST(Sampler, BadSettingsAreRefused) {
  EXPECT_THROW(Sampler({-1.0, 0, 1.0, 0}), Error);
  EXPECT_THROW(Sampler({1.0, -2, 1.0, 0}), Error);
  EXPECT_THROW(Sampler({1.0, 0, 0.0, 0}), Error);
  EXPECT_THROW(Sampler({1.0, 0, 1.5, 0}), Error);
}

}  // namespace
}  // namespace asteria
