// model/decoder.hpp against the training forward (Model): the logits of every prefix, token by
// token over the key/value cache, equal the full forward's over the whole prefix (fp32 rounding),
// and a greedy continuation over the cache is the argmax of full forwards without it; for every
// architecture variant, with a padded vocabulary. Prefill in passes of any size gives the same.
#include "model/decoder.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "core/error.hpp"
#include "model_test_util.hpp"

namespace asteria {
namespace {

struct Variant {
  const char* name;
  NormKind norm;
  NormPlacement placement;
  bool qk_norm, tied;
};

const Variant kVariants[] = {
    {"olmo_tied", NormKind::LayerNorm, NormPlacement::Pre, false, true},
    {"pre_rms_untied", NormKind::RMSNorm, NormPlacement::Pre, false, false},
    {"olmo2_untied", NormKind::RMSNorm, NormPlacement::Post, true, false},
    {"olmo2_tied", NormKind::RMSNorm, NormPlacement::Post, true, true},
};

ModelConfig config_of(const Variant& v) {
  ModelConfig c = testing::tiny_config();   // vocabulary 30 padded to 32 rows
  c.norm = v.norm;
  c.norm_placement = v.placement;
  c.qk_norm = v.qk_norm;
  c.tied_embeddings = v.tied;
  c.seq_len = 20;
  c.init_std = 0.4;   // peaked predictions: argmaxes far apart
  return c;
}

std::vector<int32_t> prompt_of(const ModelConfig& c, int n, uint64_t seed) {
  testing::TestRng rng(seed);
  std::vector<int32_t> t;
  for (int i = 0; i < n; i++) t.push_back(static_cast<int32_t>((rng.uniform() + 1) / 2 * c.vocab_size));
  return t;
}

double relative_difference(const std::vector<float>& a, const std::vector<double>& b) {
  double d = 0, s = 0;
  for (size_t i = 0; i < b.size(); i++) {
    d = std::max(d, std::abs(double(a[i]) - b[i]));
    s = std::max(s, std::abs(b[i]));
  }
  return d / s;
}

TEST(Decoder, LogitsOfEveryPrefixMatchTheTrainingForward) {
  for (const Variant& v : kVariants) {
    const ModelConfig cfg = config_of(v);
    Model<float> model(cfg, 1);
    model.init(5);
    testing::perturb_norm_weights(model, 6);
    Decoder<float> d(cfg, cfg.seq_len);
    d.load(testing::ModelParams(model));
    const std::vector<int32_t> tokens = prompt_of(cfg, cfg.seq_len, 9);
    for (int n = 1; n <= cfg.seq_len; n++) {
      const std::vector<float>& got = d.forward(&tokens[n - 1], 1);
      ASSERT_EQ(got.size(), static_cast<size_t>(cfg.embedding_size));   // every row, padding too
      const std::vector<int32_t> prefix(tokens.begin(), tokens.begin() + n);
      // fp32 against fp64: a few 1e-6 of the largest logit, by the GEMM library's summation order.
      EXPECT_LT(relative_difference(got, testing::full_forward_last_logits(model, prefix)), 1e-5) << v.name << " n " << n;
    }
    EXPECT_EQ(d.position(), cfg.seq_len);
  }
}

TEST(Decoder, GreedyContinuationWithTheCacheIsTheArgmaxOfFullForwards) {
  for (const Variant& v : kVariants) {
    const ModelConfig cfg = config_of(v);
    Model<float> model(cfg, 1);
    model.init(11);
    testing::perturb_norm_weights(model, 12);
    Decoder<float> d(cfg, cfg.seq_len);
    d.load(testing::ModelParams(model));
    std::vector<int32_t> cached = prompt_of(cfg, 4, 13), full = cached;
    const std::vector<float>* logits = &d.forward(cached.data(), static_cast<int>(cached.size()));
    while (static_cast<int>(cached.size()) < cfg.seq_len) {
      cached.push_back(static_cast<int32_t>(std::max_element(logits->begin(), logits->begin() + cfg.vocab_size) -
                                            logits->begin()));
      const std::vector<double> ref = testing::full_forward_last_logits(model, full);
      full.push_back(static_cast<int32_t>(std::max_element(ref.begin(), ref.begin() + cfg.vocab_size) - ref.begin()));
      if (static_cast<int>(cached.size()) < cfg.seq_len) logits = &d.forward(&cached.back(), 1);
    }
    EXPECT_EQ(cached, full) << v.name;
  }
}

TEST(Decoder, PrefillInPassesOfAnySizeGivesTheSameLogits) {
  const ModelConfig cfg = config_of(kVariants[2]);
  Model<float> model(cfg, 1);
  model.init(3);
  const std::vector<int32_t> tokens = prompt_of(cfg, 17, 4);
  Decoder<float> whole(cfg, cfg.seq_len), passes(cfg, cfg.seq_len, /*max_rows=*/3);
  whole.load(testing::ModelParams(model));
  passes.load(testing::ModelParams(model));
  const std::vector<float> a = whole.forward(tokens.data(), 17);
  const std::vector<float>& b = passes.forward(tokens.data(), 17);
  EXPECT_LT(relative_difference(b, std::vector<double>(a.begin(), a.end())), 1e-6);
  // Reset starts over: the same prompt again gives the same logits.
  whole.reset();
  EXPECT_EQ(whole.forward(tokens.data(), 17), a);
}

TEST(Decoder, BeyondTheContextOrTheRowsIsRefused) {
  const ModelConfig cfg = config_of(kVariants[0]);
  Decoder<float> d(cfg, 6);
  std::vector<int32_t> t(7, 1);
  try {
    d.forward(t.data(), 7);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("exceed the context of 6"), std::string::npos) << e.what();
  }
  t[0] = cfg.embedding_size;
  EXPECT_THROW(d.forward(t.data(), 1), Error);
}

}  // namespace
}  // namespace asteria
