// The Model contract outside of gradients: layer names and tables, parameter counts, the loss
// parts, activation accounting and the errors a user can cause.
#include <gtest/gtest.h>

#include <cmath>

#include "core/error.hpp"
#include "model/model.hpp"
#include "model_test_util.hpp"

namespace asteria {
namespace {

TEST(ModelApi, LayersAndTablesOfAnOlmo2StyleConfig) {
  ModelConfig cfg = testing::tiny_config();
  cfg.norm = NormKind::RMSNorm;
  cfg.norm_placement = NormPlacement::Post;
  cfg.qk_norm = true;
  cfg.tied_embeddings = false;
  Model<float> m(cfg, 2);
  ASSERT_EQ(m.num_layers(), 4);
  EXPECT_EQ(m.layer_name(0), "embed");
  EXPECT_EQ(m.layer_name(1), "blocks.0");
  EXPECT_EQ(m.layer_name(2), "blocks.1");
  EXPECT_EQ(m.layer_name(3), "head");
  const int64_t C = 16, F = 24, E = 32;
  const auto& b1 = m.table(2);
  const std::vector<std::pair<std::string, std::vector<int64_t>>> expect = {
      {"blocks.1.att_norm", {C}},   {"blocks.1.att_qkv", {3 * C, C}}, {"blocks.1.q_norm", {C}},
      {"blocks.1.k_norm", {C}},     {"blocks.1.att_out", {C, C}},     {"blocks.1.mlp_norm", {C}},
      {"blocks.1.mlp_up", {2 * F, C}}, {"blocks.1.mlp_down", {C, F}}};
  ASSERT_EQ(b1.entries.size(), expect.size());
  size_t offset = 0;
  for (size_t i = 0; i < expect.size(); i++) {
    EXPECT_EQ(b1.entries[i].name, expect[i].first);
    EXPECT_EQ(b1.entries[i].shape, expect[i].second);
    EXPECT_EQ(b1.entries[i].offset, offset);
    EXPECT_EQ(b1.entries[i].cls,
              expect[i].second.size() == 1 ? ParamClass::Norm : ParamClass::Matrix);
    offset += b1.entries[i].numel;
  }
  EXPECT_EQ(b1.numel, offset);
  EXPECT_EQ(m.table(0).entries.at(0).cls, ParamClass::Embedding);
  ASSERT_NE(m.table(3).find("lm_head"), nullptr);
  EXPECT_EQ(m.table(3).find("lm_head")->cls, ParamClass::Embedding);
  EXPECT_EQ(m.table(3).find("lm_head")->shape, (std::vector<int64_t>{E, C}));
  const size_t block = 4 * C + 3 * C * C + C * C + 3 * C * F;
  EXPECT_EQ(m.num_params(), E * C + 2 * block + C + E * C);
}

TEST(ModelApi, TiedLayerNormHeadHasNoParameters) {
  const ModelConfig cfg = testing::tiny_config();  // LayerNorm, tied
  const auto tables = model_param_tables(cfg);
  ASSERT_EQ(tables.size(), 4u);
  EXPECT_EQ(tables[3].numel, 0u);
  EXPECT_EQ(tables[1].entries.size(), 4u);  // att_qkv, att_out, mlp_up, mlp_down
}

TEST(ModelApi, PresetParameterCounts) {
  // OLMo-1B: ~1.18B parameters with the tied 50304-row embedding.
  const auto tables = model_param_tables(model_preset("olmo-1b"));
  size_t n = 0;
  for (const auto& t : tables) n += t.numel;
  const size_t C = 2048, F = 8192, L = 16, E = 50304;
  EXPECT_EQ(n, E * C + L * (4 * C * C + 3 * C * F));
}

TEST(ModelApi, ActivationBytesMatchTheReport) {
  const ModelConfig cfg = model_preset("tiny");
  Model<float> m(cfg, 3);
  EXPECT_EQ(m.activation_bytes(), model_activation_bytes(cfg, 3));
  EXPECT_GT(model_activation_bytes(cfg, 6), model_activation_bytes(cfg, 3));
}

TEST(ModelApi, ZeroHeadGivesUniformLossAndKnownZLoss) {
  // With a zero LM head every logit is 0: CE = ln V and lse^2 = (ln V)^2 at every position.
  ModelConfig cfg = testing::tiny_config();
  cfg.tied_embeddings = false;
  cfg.z_loss = 1e-2;
  Model<double> m(cfg, 2);
  m.init(3);
  const auto* head = m.table(3).find("lm_head");
  ASSERT_NE(head, nullptr);
  for (size_t i = 0; i < head->numel; i++) m.params(3)[head->offset + i] = 0;
  const auto t = testing::random_batch(cfg, 2, 4);
  m.set_batch(t.inputs.data(), t.targets.data());
  const double loss = testing::forward_all(m);
  const double lnV = std::log(30.0);
  EXPECT_NEAR(m.last_ce_loss(), lnV, 1e-12);
  EXPECT_NEAR(m.last_z_loss(), 1e-2 * lnV * lnV, 1e-12);
  EXPECT_NEAR(loss, m.last_ce_loss() + m.last_z_loss(), 1e-15);
}

TEST(ModelApi, RandomInitLossIsNearUniform) {
  // A freshly initialized float model predicts close to uniform: loss ~ ln(vocab).
  const ModelConfig cfg = model_preset("tiny");
  Model<float> m(cfg, 2);
  m.init(1);
  const auto t = testing::random_batch(cfg, 2, 5);
  m.set_batch(t.inputs.data(), t.targets.data());
  const double loss = testing::forward_all(m);
  EXPECT_NEAR(loss, std::log(512.0), 0.1);
  EXPECT_EQ(m.last_z_loss(), 0.0);
}

TEST(ModelApi, BadConfigAndTokensAreErrors) {
  ModelConfig cfg = testing::tiny_config();
  cfg.n_heads = 3;  // 16 % 3 != 0
  EXPECT_THROW(Model<float>(cfg, 1), Error);
  cfg = testing::tiny_config();
  cfg.embedding_size = 16;  // below the vocabulary
  EXPECT_THROW(Model<float>(cfg, 1), Error);
  cfg = testing::tiny_config();
  EXPECT_THROW(Model<float>(cfg, 0), Error);
  Model<float> m(cfg, 1);
  std::vector<int32_t> in(cfg.seq_len, 1), tg(cfg.seq_len, 1);
  tg[3] = cfg.vocab_size;  // one past the last valid id (a padded embedding row)
  EXPECT_THROW(m.set_batch(in.data(), tg.data()), Error);
  tg[3] = 0;
  in[0] = -1;
  EXPECT_THROW(m.set_batch(in.data(), tg.data()), Error);
}

}  // namespace
}  // namespace asteria
