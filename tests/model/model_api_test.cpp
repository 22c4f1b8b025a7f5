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

TEST(ModelApi, ActivationBytesOfALargePresetDoNotOverflow) {
  // OLMo-1B at batch 1: the saved attention probabilities alone are 16 layers x 16 heads x
  // 2048^2 floats (4 GiB), beyond 32-bit sizes; computed without allocating anything.
  const ModelConfig cfg = model_preset("olmo-1b");
  const size_t probs = size_t(16) * 16 * 2048 * 2048 * sizeof(float);
  const size_t logits = size_t(2048) * 50304 * sizeof(float);
  EXPECT_GT(model_activation_bytes(cfg, 1), probs + logits);
  EXPECT_LT(model_activation_bytes(cfg, 1), 2 * (probs + logits) + (size_t(4) << 30));
}

TEST(ModelApi, ZeroHeadGivesUniformLossAndKnownZLoss) {
  // With a zero LM head every logit is 0: CE = ln E and lse^2 = (ln E)^2 at every position (the
  // softmax runs over all E = embedding_size rows, padding included, as OLMo's does).
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
  ASSERT_EQ(cfg.embedding_size, 32);
  const double lnE = std::log(32.0);
  EXPECT_NEAR(m.last_ce_loss(), lnE, 1e-12);
  EXPECT_NEAR(m.last_z_loss(), 1e-2 * lnE * lnE, 1e-12);
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

TEST(ModelApi, BoundBuffersGiveTheOwnedModelsLossAndGradients) {
  // Storage::Bound (sharded training): no buffers of its own; layer by layer, buffers bound
  // only while the layer runs (copies of an owned model's parameters, fresh gradient buffers)
  // give the same loss and gradients bit for bit, tied and untied.
  for (bool tied : {false, true}) {
    SCOPED_TRACE(tied ? "tied" : "untied");
    ModelConfig cfg = testing::tiny_config();
    cfg.tied_embeddings = tied;
    Model<float> owned(cfg, 2), bound(cfg, 2, Model<float>::Storage::Bound);
    owned.init(7);
    const int L = owned.num_layers();
    for (int l = 0; l < L; ++l) EXPECT_EQ(bound.params(l), nullptr);
    const auto t = testing::random_batch(cfg, 2, 3);
    owned.set_batch(t.inputs.data(), t.targets.data());
    bound.set_batch(t.inputs.data(), t.targets.data());
    std::vector<std::vector<float>> p(L), g(L);
    for (int l = 0; l < L; ++l) {
      p[l].assign(owned.params(l), owned.params(l) + owned.table(l).numel);
      g[l].assign(owned.table(l).numel, 0.0f);
    }
    double a = 0, b = 0;
    for (int l = 0; l < L; ++l) {
      a = owned.forward(l);
      bound.bind_params(l, p[l].data());
      b = bound.forward(l);
      if (!(tied && l == 0)) bound.bind_params(l, nullptr);   // the tied head reads the embedding
    }
    EXPECT_EQ(a, b);
    for (int l = L - 1; l >= 0; --l) {
      owned.backward(l, 0.5);
      if (l > 0) bound.bind_params(l, p[l].data());
      bound.bind_grads(l, g[l].data());
      if (tied && l == L - 1) bound.bind_grads(0, g[0].data());
      bound.backward(l, 0.5);   // the embedding's backward reads no parameters
      if (l > 0) bound.bind_params(l, nullptr);
      if (tied && l == L - 1) bound.bind_params(0, nullptr);
      if (!(tied && l == L - 1)) bound.bind_grads(l, nullptr);
    }
    for (int l = 0; l < L; ++l) EXPECT_EQ(g[l], std::vector<float>(owned.grads(l), owned.grads(l) + owned.table(l).numel)) << l;
    // init_layer into a bound buffer: the owned model's values.
    for (int l = 0; l < L; ++l) {
      std::vector<float> fresh(owned.table(l).numel, -1.0f);
      bound.bind_params(l, fresh.data());
      bound.init_layer(l, 7);
      bound.bind_params(l, nullptr);
      EXPECT_EQ(fresh, p[l]) << l;
    }
  }
}

// runtime.precision bf16 with owned parameters: the GEMMs read each layer's bf16 copy of its
// parameters, remade once after each change. A bound model (which rounds each GEMM's weight)
// gives the same loss and gradients bit for bit before and after an update written through
// params(l), as the optimizer writes it, tied and untied; a second micro-batch remakes no copy.
TEST(ModelApi, Bf16WeightCopyGivesTheRoundedWeightsBitsAndFollowsEveryUpdate) {
  for (bool tied : {false, true}) {
    SCOPED_TRACE(tied ? "tied" : "untied");
    ModelConfig cfg = testing::tiny_config();
    cfg.tied_embeddings = tied;
    using M = Model<float>;
    M owned(cfg, 2, M::Storage::Owned, {}, ComputePrecision::Bf16), bound(cfg, 2, M::Storage::Bound, {}, ComputePrecision::Bf16);
    owned.init(7);
    const int L = owned.num_layers();
    size_t gemm_params = owned.table(tied ? 0 : L - 1).numel;
    for (int l = 1; l < L - 1; ++l) gemm_params += owned.table(l).numel;
    EXPECT_EQ(owned.bf16_copy_bytes(), gemm_params * 2);
    EXPECT_EQ(bound.bf16_copy_bytes(), 0u);
    const auto t = testing::random_batch(cfg, 2, 3);
    owned.set_batch(t.inputs.data(), t.targets.data());
    bound.set_batch(t.inputs.data(), t.targets.data());
    for (int update = 0; update < 2; ++update) {
      SCOPED_TRACE("after " + std::to_string(update) + " updates");
      std::vector<std::vector<float>> p(L), g(L);
      for (int l = 0; l < L; ++l) {
        p[l].assign(owned.params(l), owned.params(l) + owned.table(l).numel);
        g[l].assign(owned.table(l).numel, 0.0f);
        bound.bind_params(l, p[l].data());
        bound.bind_grads(l, g[l].data());
      }
      owned.zero_grads();
      const size_t copies = owned.bf16_copies_made();
      double a = 0, b = 0;
      for (int micro = 0; micro < 2; ++micro) {
        for (int l = 0; l < L; ++l) {
          a = owned.forward(l);
          b = bound.forward(l);
        }
        EXPECT_EQ(a, b);
        for (int l = L - 1; l >= 0; --l) {
          owned.backward(l, 0.5);
          bound.backward(l, 0.5);
        }
        // Every layer with GEMM weights (the blocks and the LM head's) copied once, at the first
        // micro-batch only.
        EXPECT_EQ(owned.bf16_copies_made() - copies, static_cast<size_t>(cfg.n_layers + 1)) << "micro-batch " << micro;
      }
      for (int l = 0; l < L; ++l)
        EXPECT_EQ(g[l], std::vector<float>(owned.grads(l), owned.grads(l) + owned.table(l).numel)) << l;
      // An update as the optimizer makes it, large enough to change the bf16 values.
      for (int l = 0; l < L; ++l) {
        float* w = owned.params(l);
        for (size_t i = 0; i < owned.table(l).numel; ++i) w[i] += 0.01f * static_cast<float>(i % 7) - 0.02f;
      }
    }
  }
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
