// Whole-model gradient checks: Model<double> against central differences of its own loss, for
// every parameter tensor, in every combination of norm placement/kind, tied head, QK-norm and
// z-loss; plus accumulation of gradients across backward calls and micro-batches.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <memory>
#include <vector>
#include <cmath>
#include <string>
#include <tuple>

#include "grad_check.hpp"
#include "model/activation_layout.hpp"
#include "model/model.hpp"
#include "model_test_util.hpp"

namespace asteria {
namespace {

using testing::backward_all;
using testing::forward_all;
using testing::max_gradient_error;

enum class Arch { PreLayerNorm, PreRMSNorm, PostRMSNorm };

ModelConfig arch_config(Arch arch, bool tied, bool qk_norm, bool z_loss) {
  ModelConfig c = testing::tiny_config();
  c.norm = arch == Arch::PreLayerNorm ? NormKind::LayerNorm : NormKind::RMSNorm;
  c.norm_placement = arch == Arch::PostRMSNorm ? NormPlacement::Post : NormPlacement::Pre;
  c.tied_embeddings = tied;
  c.qk_norm = qk_norm;
  c.z_loss = z_loss ? 0.1 : 0.0;
  return c;
}

class ModelGrad : public ::testing::TestWithParam<std::tuple<Arch, bool, bool, bool>> {};

TEST_P(ModelGrad, MatchesFiniteDifferencesForEveryTensor) {
  const auto [arch, tied, qk_norm, z_loss] = GetParam();
  const ModelConfig cfg = arch_config(arch, tied, qk_norm, z_loss);
  const int batch = 2;
  Model<double> m(cfg, batch);
  m.init(123);
  testing::perturb_norm_weights(m, 5);
  const auto tokens = testing::random_batch(cfg, batch, 77);
  m.set_batch(tokens.inputs.data(), tokens.targets.data());

  m.zero_grads();
  forward_all(m);
  backward_all(m, 1.0);

  auto loss = [&] { return forward_all(m); };
  int tensors = 0;
  for (int l = 0; l < m.num_layers(); l++)
    for (const auto& e : m.table(l).entries) {
      // h = 3e-4: the whole model's loss is curved enough in some embedding entries that the
      // stencil's O(h^4) truncation at 1e-3 reaches a few 1e-6 (it falls as h^4; rounding stays
      // near 1e-12 at this h).
      const double err = max_gradient_error(loss, m.params(l) + e.offset, m.grads(l) + e.offset,
                                            e.numel, /*max_checks=*/16, /*h=*/3e-4);
      EXPECT_LT(err, 1e-6) << e.name;
      tensors++;
    }
  // Every tensor of the config was visited (embed, 2 blocks, head).
  const int per_block = 4 + (cfg.norm == NormKind::RMSNorm ? 2 : 0) + (qk_norm ? 2 : 0);
  const int head = (cfg.norm == NormKind::RMSNorm ? 1 : 0) + (tied ? 0 : 1);
  EXPECT_EQ(tensors, 1 + 2 * per_block + head);
}

// model.head_chunk: the LM head and loss in chunks of 5 of the 16 rows (the last one short),
// recomputed in the backward, against the whole micro-batch at once. Each row's logits and
// dL/dlogits are computed by the same ops either way; only the loss's sum over the chunks and
// the head weight's gradient, accumulated chunk by chunk, round in another order: equal within
// fp64 rounding here, and within fp32 rounding in the float model.
TEST_P(ModelGrad, ChunkedHeadGivesTheSameLossAndGradients) {
  const auto [arch, tied, qk_norm, z_loss] = GetParam();
  ModelConfig cfg = arch_config(arch, tied, qk_norm, z_loss);
  ModelConfig chunked_cfg = cfg;
  chunked_cfg.head_chunk = 5;
  const int batch = 2;
  const auto tokens = testing::random_batch(cfg, batch, 78);
  auto run = [&](auto& m) {
    m.init(321);
    testing::perturb_norm_weights(m, 6);
    m.set_batch(tokens.inputs.data(), tokens.targets.data());
    m.zero_grads();
    const double loss = forward_all(m);
    backward_all(m, 1.0);
    return loss;
  };
  Model<double> whole(cfg, batch), chunked(chunked_cfg, batch);
  const double lw = run(whole), lc = run(chunked);
  EXPECT_NEAR(lc, lw, 1e-13 * std::fabs(lw));
  for (int l = 0; l < whole.num_layers(); l++)
    for (size_t i = 0; i < whole.table(l).numel; i++)
      ASSERT_NEAR(chunked.grads(l)[i], whole.grads(l)[i], 1e-12 * (1 + std::fabs(whole.grads(l)[i]))) << whole.layer_name(l);
  Model<float> whole_f(cfg, batch), chunked_f(chunked_cfg, batch);
  const double lwf = run(whole_f), lcf = run(chunked_f);
  EXPECT_NEAR(lcf, lwf, 1e-6 * std::fabs(lwf));
  for (int l = 0; l < whole_f.num_layers(); l++) {
    double gmax = 0, dmax = 0;
    for (size_t i = 0; i < whole_f.table(l).numel; i++) {
      gmax = std::max(gmax, static_cast<double>(std::fabs(whole_f.grads(l)[i])));
      dmax = std::max(dmax, static_cast<double>(std::fabs(whole_f.grads(l)[i] - chunked_f.grads(l)[i])));
    }
    EXPECT_LE(dmax, 1e-6 * gmax) << whole_f.layer_name(l);
  }
  // Only one chunk's logits are held: (16 - 5) rows x E fewer floats.
  EXPECT_EQ(model_activation_bytes(cfg, batch) - model_activation_bytes(chunked_cfg, batch),
            ((16 * cfg.embedding_size + 15) / 16 * 16 - (5 * cfg.embedding_size + 15) / 16 * 16) * sizeof(float));
}

// train.activation_recompute: a recomputed block runs the forward's operations again on the
// same input into the same buffers, so its activations, and the gradients, come out bit for bit
// as without recompute; with runtime.precision bf16 too, where a kept block's activations are
// packed as bf16 and widened back, and a recomputed one's are rounded in place (model.hpp).
// Three blocks (all recomputed; every_k = 2: blocks 0 and 2) and two micro-batches, so that a
// recompute follows other blocks' forwards into the shared buffer.
TEST_P(ModelGrad, ActivationRecomputeGivesBitIdenticalGradients) {
  const auto [arch, tied, qk_norm, z_loss] = GetParam();
  ModelConfig cfg = arch_config(arch, tied, qk_norm, z_loss);
  cfg.n_layers = 3;
  const int batch = 2;
  const auto micro0 = testing::random_batch(cfg, batch, 81), micro1 = testing::random_batch(cfg, batch, 82);
  using Mode = ActivationRecompute::Mode;
  for (const ComputePrecision precision : {ComputePrecision::Fp32, ComputePrecision::Bf16}) {
    SCOPED_TRACE(to_string(precision));
    auto run = [&](const ActivationRecompute& recompute, std::vector<double>& losses) {
      auto m = std::make_unique<Model<float>>(cfg, batch, Model<float>::Storage::Owned, recompute, precision);
      m->init(99);
      testing::perturb_norm_weights(*m, 7);
      m->zero_grads();
      for (const auto* t : {&micro0, &micro1}) {
        m->set_batch(t->inputs.data(), t->targets.data());
        losses.push_back(forward_all(*m));
        backward_all(*m, 0.5);
      }
      return m;
    };
    std::vector<double> ref_losses;
    const auto ref = run({}, ref_losses);
    for (const ActivationRecompute recompute : {ActivationRecompute{Mode::Blocks, 1}, ActivationRecompute{Mode::EveryK, 2}}) {
      std::vector<double> losses;
      const auto m = run(recompute, losses);
      EXPECT_EQ(losses, ref_losses);
      for (int l = 0; l < m->num_layers(); l++) {
        EXPECT_EQ(m->recomputes(l), l >= 1 && l <= 3 && (recompute.mode == Mode::Blocks || (l - 1) % 2 == 0));
        for (size_t i = 0; i < m->table(l).numel; i++)
          ASSERT_EQ(m->grads(l)[i], ref->grads(l)[i]) << m->layer_name(l) << " [" << i << "]";
      }
      // fp32: one block buffer (the shared one) instead of three, or two (block 1's and the
      // shared). bf16: every block works in the shared buffer; a recomputed one packs nothing.
      const BlockActivationLayout layout = block_activation_layout(cfg, batch);
      const BlockStorageLayout packed = block_storage_layout(cfg, layout);
      const int recomputed = recompute.recomputed_blocks(cfg.n_layers);
      const size_t saved = precision == ComputePrecision::Bf16
                               ? recomputed * (packed.bf16_elems * sizeof(uint16_t) + packed.fp32_elems * sizeof(float))
                               : (recomputed - 1) * layout.total * sizeof(float);
      EXPECT_EQ(ref->activation_bytes() - m->activation_bytes(), saved);
      EXPECT_EQ(m->activation_bytes(), model_activation_bytes(cfg, batch, recompute, precision));
    }
    EXPECT_EQ(ref->activation_bytes(), model_activation_bytes(cfg, batch, {}, precision));
  }
}

// runtime.precision bf16 against fp32 on the same parameters and tokens. The GEMMs' operands and
// the kept activations are rounded to bf16 (8 significant bits: 2^-9 relative per value), the
// sums stay fp32, so a dot product is off by about 2^-9 relative; through the few dozen ops of
// this model that is a few 1e-3 on the loss and up to a few percent on a layer's gradient:
// bounds 1e-2 and 5e-2 (a wrong op or a tensor read before it was widened is off by far more,
// tens of percent). The gradients must differ too: bf16 that changes nothing was not applied.
TEST_P(ModelGrad, Bf16StaysWithinBf16RoundingOfFp32) {
  const auto [arch, tied, qk_norm, z_loss] = GetParam();
  const ModelConfig cfg = arch_config(arch, tied, qk_norm, z_loss);
  const int batch = 2;
  const auto tokens = testing::random_batch(cfg, batch, 85);
  Model<float> fp32(cfg, batch), bf16(cfg, batch, Model<float>::Storage::Owned, {}, ComputePrecision::Bf16);
  double loss[2];
  Model<float>* models[2] = {&fp32, &bf16};
  for (int i = 0; i < 2; i++) {
    models[i]->init(21);
    testing::perturb_norm_weights(*models[i], 9);
    models[i]->set_batch(tokens.inputs.data(), tokens.targets.data());
    models[i]->zero_grads();
    loss[i] = forward_all(*models[i]);
    backward_all(*models[i], 1.0);
  }
  EXPECT_NEAR(loss[1], loss[0], 1e-2 * std::fabs(loss[0]));
  EXPECT_NE(loss[1], loss[0]);
  for (int l = 0; l < fp32.num_layers(); l++) {
    double norm = 0, diff = 0;
    for (size_t i = 0; i < fp32.table(l).numel; i++) {
      norm += double(fp32.grads(l)[i]) * fp32.grads(l)[i];
      diff += double(bf16.grads(l)[i] - fp32.grads(l)[i]) * (bf16.grads(l)[i] - fp32.grads(l)[i]);
    }
    EXPECT_LE(std::sqrt(diff), 5e-2 * std::sqrt(norm)) << fp32.layer_name(l);
    if (fp32.table(l).numel > 0) {
      EXPECT_GT(diff, 0) << fp32.layer_name(l);
    }
  }
  // Memory: each kept block packs about half its bytes, beside one shared fp32 block buffer (so
  // two blocks save nothing; eight do).
  EXPECT_EQ(bf16.activation_bytes(), model_activation_bytes(cfg, batch, {}, ComputePrecision::Bf16));
  ModelConfig deep = cfg;
  deep.n_layers = 8;
  EXPECT_LT(model_activation_bytes(deep, batch, {}, ComputePrecision::Bf16),
            0.8 * model_activation_bytes(deep, batch, {}, ComputePrecision::Fp32));
}

// model.attention: the tiled kernel (no T x T kept) against the full one, in the whole model.
TEST_P(ModelGrad, TiledAttentionMatchesFullAttention) {
  const auto [arch, tied, qk_norm, z_loss] = GetParam();
  ModelConfig tiled = arch_config(arch, tied, qk_norm, z_loss), full = tiled;
  tiled.attention = AttentionKind::Tiled;
  full.attention = AttentionKind::Full;
  const int batch = 2;
  const auto tokens = testing::random_batch(tiled, batch, 83);
  auto run = [&](Model<float>& m) {
    m.init(17);
    testing::perturb_norm_weights(m, 8);
    m.set_batch(tokens.inputs.data(), tokens.targets.data());
    m.zero_grads();
    const double loss = forward_all(m);
    backward_all(m, 1.0);
    return loss;
  };
  Model<float> mt(tiled, batch), mf(full, batch);
  const double lt = run(mt), lf = run(mf);
  EXPECT_NEAR(lt, lf, 1e-6 * std::fabs(lf));
  for (int l = 0; l < mf.num_layers(); l++) {
    double gmax = 0, dmax = 0;
    for (size_t i = 0; i < mf.table(l).numel; i++) {
      gmax = std::max(gmax, static_cast<double>(std::fabs(mf.grads(l)[i])));
      dmax = std::max(dmax, static_cast<double>(std::fabs(mf.grads(l)[i] - mt.grads(l)[i])));
    }
    EXPECT_LE(dmax, 1e-5 * gmax) << mf.layer_name(l);
  }
}

std::string arch_name(Arch a) {
  switch (a) {
    case Arch::PreLayerNorm: return "PreLN";
    case Arch::PreRMSNorm: return "PreRMS";
    case Arch::PostRMSNorm: return "PostRMS";
  }
  return "?";
}

std::string variant_name(
    const ::testing::TestParamInfo<std::tuple<Arch, bool, bool, bool>>& info) {
  const auto& [arch, tied, qk, z] = info.param;
  return arch_name(arch) + (tied ? "_tied" : "_untied") + (qk ? "_qknorm" : "") +
         (z ? "_zloss" : "");
}

INSTANTIATE_TEST_SUITE_P(AllVariants, ModelGrad,
                         ::testing::Combine(::testing::Values(Arch::PreLayerNorm,
                                                              Arch::PreRMSNorm,
                                                              Arch::PostRMSNorm),
                                            ::testing::Bool(), ::testing::Bool(),
                                            ::testing::Bool()),
                         variant_name);

TEST(ModelGradAccumulation, SecondBackwardAddsScaledGradients) {
  const ModelConfig cfg = arch_config(Arch::PostRMSNorm, true, true, true);
  Model<double> m(cfg, 2);
  m.init(9);
  const auto tokens = testing::random_batch(cfg, 2, 3);
  m.set_batch(tokens.inputs.data(), tokens.targets.data());
  m.zero_grads();
  forward_all(m);
  backward_all(m, 1.0);
  std::vector<std::vector<double>> g1;
  for (int l = 0; l < m.num_layers(); l++)
    g1.emplace_back(m.grads(l), m.grads(l) + m.table(l).numel);
  backward_all(m, 0.5);  // same forward: backward must not have consumed its activations
  double gmax = 0;
  for (int l = 0; l < m.num_layers(); l++)
    for (size_t i = 0; i < m.table(l).numel; i++) {
      EXPECT_NEAR(m.grads(l)[i], 1.5 * g1[l][i], 1e-12) << m.layer_name(l) << " " << i;
      gmax = std::max(gmax, std::fabs(g1[l][i]));
    }
  EXPECT_GT(gmax, 1e-3);
}

TEST(ModelGradAccumulation, MicroBatchesSum) {
  const ModelConfig cfg = arch_config(Arch::PreRMSNorm, false, false, false);
  Model<double> m(cfg, 2);
  m.init(10);
  const auto a = testing::random_batch(cfg, 2, 1), b = testing::random_batch(cfg, 2, 2);
  auto grads_of = [&](const testing::TokenBatch& t) {
    m.zero_grads();
    m.set_batch(t.inputs.data(), t.targets.data());
    forward_all(m);
    backward_all(m, 1.0);
    std::vector<double> g;
    for (int l = 0; l < m.num_layers(); l++)
      g.insert(g.end(), m.grads(l), m.grads(l) + m.table(l).numel);
    return g;
  };
  const auto ga = grads_of(a), gb = grads_of(b);
  m.zero_grads();
  for (const auto* t : {&a, &b}) {
    m.set_batch(t->inputs.data(), t->targets.data());
    forward_all(m);
    backward_all(m, 0.5);
  }
  size_t k = 0;
  for (int l = 0; l < m.num_layers(); l++)
    for (size_t i = 0; i < m.table(l).numel; i++, k++)
      EXPECT_NEAR(m.grads(l)[i], 0.5 * (ga[k] + gb[k]), 1e-12);
}

TEST(ModelFloat, MatchesDoubleModel) {
  // The float path (fast exp, float accumulations) tracks the fp64 reference.
  for (Arch arch : {Arch::PreLayerNorm, Arch::PostRMSNorm}) {
    const ModelConfig cfg = arch_config(arch, false, true, true);
    Model<float> mf(cfg, 2);
    Model<double> md(cfg, 2);
    mf.init(4);
    md.init(4);
    const auto t = testing::random_batch(cfg, 2, 8);
    mf.set_batch(t.inputs.data(), t.targets.data());
    md.set_batch(t.inputs.data(), t.targets.data());
    mf.zero_grads();
    md.zero_grads();
    const double lf = forward_all(mf), ld = forward_all(md);
    EXPECT_NEAR(lf, ld, 1e-5 * std::fabs(ld));
    backward_all(mf, 1.0);
    backward_all(md, 1.0);
    for (int l = 0; l < md.num_layers(); l++) {
      double gmax = 0, dmax = 0;
      for (size_t i = 0; i < md.table(l).numel; i++) {
        gmax = std::max(gmax, std::fabs(md.grads(l)[i]));
        dmax = std::max(dmax, std::fabs(md.grads(l)[i] - mf.grads(l)[i]));
      }
      EXPECT_LT(dmax, 1e-4 * gmax) << md.layer_name(l);
    }
  }
}

TEST(ModelThreads, ThreadedMatchesSingleThreaded) {
  // Large enough that every op takes its parallel path (ops/parallel.hpp); the gradient checks
  // above run single-threaded sizes, so this ties the threaded code to them.
  ModelConfig cfg = arch_config(Arch::PostRMSNorm, false, true, true);
  cfg.d_model = 128;
  cfg.n_heads = 4;
  cfg.mlp_hidden = 256;
  cfg.seq_len = 96;  // > the attention row block
  cfg.vocab_size = 500;
  cfg.embedding_size = 512;
  const int batch = 4;
  const auto t = testing::random_batch(cfg, batch, 21);
  auto run = [&](int threads) {
    const int saved = omp_get_max_threads();
    omp_set_num_threads(threads);
    Model<double> m(cfg, batch);
    m.init(2);
    m.set_batch(t.inputs.data(), t.targets.data());
    m.zero_grads();
    const double loss = forward_all(m);
    backward_all(m, 1.0);
    std::vector<double> g{loss};
    for (int l = 0; l < m.num_layers(); l++)
      g.insert(g.end(), m.grads(l), m.grads(l) + m.table(l).numel);
    omp_set_num_threads(saved);
    return g;
  };
  const auto one = run(1), many = run(std::max(2, omp_get_max_threads()));
  ASSERT_EQ(one.size(), many.size());
  double gmax = 0, dmax = 0;
  for (size_t i = 1; i < one.size(); i++) {
    gmax = std::max(gmax, std::fabs(one[i]));
    dmax = std::max(dmax, std::fabs(one[i] - many[i]));
  }
  EXPECT_NEAR(one[0], many[0], 1e-12 * std::fabs(one[0]));
  EXPECT_LT(dmax, 1e-10 * gmax);
  EXPECT_GT(gmax, 0.0);
}

}  // namespace
}  // namespace asteria
