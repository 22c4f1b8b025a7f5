// Whole-model gradient checks: Model<double> against central differences of its own loss, for
// every parameter tensor, in every combination of norm placement/kind, tied head, QK-norm and
// z-loss; plus accumulation of gradients across backward calls and micro-batches.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <tuple>

#include "grad_check.hpp"
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
      const double err = max_gradient_error(loss, m.params(l) + e.offset, m.grads(l) + e.offset,
                                            e.numel, /*max_checks=*/16);
      EXPECT_LT(err, 1e-6) << e.name;
      tensors++;
    }
  // Every tensor of the config was visited (embed, 2 blocks, head).
  const int per_block = 4 + (cfg.norm == NormKind::RMSNorm ? 2 : 0) + (qk_norm ? 2 : 0);
  const int head = (cfg.norm == NormKind::RMSNorm ? 1 : 0) + (tied ? 0 : 1);
  EXPECT_EQ(tensors, 1 + 2 * per_block + head);
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

}  // namespace
}  // namespace asteria
