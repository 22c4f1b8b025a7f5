// Shampoo, SOAP and KL-Shampoo against the fp64 references, hand-derived cases, invariants and
// failure paths.
#include <gtest/gtest.h>

#include <omp.h>

#include <cmath>
#include <limits>
#include <random>

#include "core/error.hpp"
#include "optim/second_order.hpp"
#include "optim/soap.hpp"
#include "reference_optimizers.hpp"

using namespace asteria;
namespace ref = asteria::reference;

namespace {

SecondOrderParams params_for(const std::string& algo, const ref::Hyper& h, int64_t max_dim) {
  SecondOrderParams p;
  p.algorithm = algo;
  p.precond.beta1 = h.beta1;
  p.precond.beta2 = h.beta2;
  p.precond.shampoo_beta = h.shampoo_beta;
  p.precond.eps = h.eps;
  p.precond.root_eps = h.root_eps;
  p.precond.precondition_frequency = h.freq;
  p.precond.start_preconditioning_step = h.start;
  p.precond.grafting = h.graft ? Grafting::Adam : Grafting::None;
  p.precond.kl_init_factor = h.init_factor;
  p.precond.kl_max_clamp = h.max_clamp;
  p.weight_decay = h.weight_decay;
  p.max_preconditioner_dim = max_dim;
  return p;
}

std::vector<std::vector<float>> random_grads(int steps, int m, int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<std::vector<float>> gs(steps, std::vector<float>(static_cast<size_t>(m) * n));
  for (auto& g : gs)
    for (auto& x : g) x = nd(rng);
  return gs;
}

// Runs the production optimizer and one reference per block over the same gradients and checks
// the parameters after every step.
template <class Ref>
void compare_with_reference(const std::string& algo, const ref::Hyper& h, int m, int n, int64_t max_dim,
                            int steps, double rel_tol, bool stagger = false) {
  ParamTable t;
  t.add("w", {m, n}, ParamClass::Matrix);
  SecondOrderParams p = params_for(algo, h, max_dim);
  p.stagger = stagger;
  SecondOrderOptimizer opt(p, {t});
  const double lr = 0.05;
  std::vector<float> w(static_cast<size_t>(m) * n);
  std::mt19937 rng(11);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (auto& x : w) x = nd(rng);
  std::vector<double> w_ref(w.begin(), w.end());
  const std::vector<double> w0 = w_ref;
  const auto& blocks = opt.blocks(0);
  std::vector<Ref> refs(blocks.size());
  for (size_t bi = 0; bi < blocks.size(); ++bi) {
    refs[bi].h = h;
    refs[bi].h.offset = static_cast<int>(opt.schedule().offset(0, static_cast<int>(bi)));
  }
  auto grads = random_grads(steps, m, n, 5);
  for (int s = 0; s < steps; ++s) {
    opt.step_layer(0, w.data(), grads[s].data(), 1.0f, lr, s + 1);
    for (size_t bi = 0; bi < blocks.size(); ++bi) {
      const MatrixBlock& b = blocks[bi];
      ref::Mat G(static_cast<int>(b.rows), static_cast<int>(b.cols));
      for (int i = 0; i < G.r; ++i)
        for (int j = 0; j < G.c; ++j) G(i, j) = grads[s][b.offset + i * b.ld + j];
      ref::Mat D = refs[bi].step(G);
      if (D.r == 0) continue;
      for (int i = 0; i < G.r; ++i)
        for (int j = 0; j < G.c; ++j) {
          double& x = w_ref[b.offset + i * b.ld + j];
          x = (x - lr * D(i, j)) * (1 - lr * h.weight_decay);
        }
    }
    // Compared on the displacement from the start, so the tolerance is relative to the updates.
    double err = 0, size = 0;
    for (size_t i = 0; i < w.size(); ++i) {
      err = std::max(err, std::abs((w[i] - w0[i]) - (w_ref[i] - w0[i])));
      size = std::max(size, std::abs(w_ref[i] - w0[i]));
    }
    ASSERT_LE(err, rel_tol * size) << algo << " step " << s + 1;
  }
}

}  // namespace

TEST(Blocks, SplitIntoNearEqualChunks) {
  auto c = split_dimension(10, 4);
  ASSERT_EQ(c.size(), 3u);
  EXPECT_EQ(c[0], (std::pair<int64_t, int64_t>{0, 4}));
  EXPECT_EQ(c[1], (std::pair<int64_t, int64_t>{4, 3}));
  EXPECT_EQ(c[2], (std::pair<int64_t, int64_t>{7, 3}));
  ParamTable t;
  t.add("norm", {8}, ParamClass::Norm);
  t.add("w", {6, 5}, ParamClass::Matrix);
  t.add("emb", {4, 5}, ParamClass::Embedding);
  auto blocks = layer_blocks(0, t, 3, false);
  ASSERT_EQ(blocks.size(), 4u);  // 6 x 5 -> rows {3, 3} x cols {3, 2}; norm and embedding skipped
  EXPECT_EQ(blocks[3].offset, 8u + 3 * 5 + 3);
  EXPECT_EQ(blocks[3].name, "w[3]: rows 3-5, cols 3-4");
  EXPECT_EQ(layer_blocks(0, t, 3, true).size(), 8u);  // + embedding 4 x 5 -> {2, 2} x {3, 2}
}

TEST(Shampoo, MatchesReference) {
  ref::Hyper h{0.9, 0.999, 0.95, 1e-8};
  h.root_eps = 1e-6;
  h.freq = 2;
  h.start = 2;
  h.weight_decay = 0.1;
  compare_with_reference<ref::Shampoo>("shampoo", h, 6, 5, 3, 7, 1e-4);
}

TEST(Shampoo, WithoutGraftingMatchesReference) {
  ref::Hyper h{0.5, 0.99, 1.0, 1e-8};
  h.root_eps = 1e-4;
  h.graft = false;
  compare_with_reference<ref::Shampoo>("shampoo", h, 4, 3, 8, 5, 1e-4);
}

TEST(Shampoo, FirstStepIsThePolarFactor) {
  // beta2 = 1 (sums), no momentum, no grafting, eps 0: L^-1/4 G R^-1/4 = U V^T.
  ParamTable t;
  t.add("w", {2, 2}, ParamClass::Matrix);
  ref::Hyper h{0.0, 1.0, 1.0, 1e-8};
  h.root_eps = 0;
  h.graft = false;
  SecondOrderOptimizer opt(params_for("shampoo", h, 8), {t});
  float w[4] = {0, 0, 0, 0};
  const float g[4] = {0, -1, 3, 0};
  opt.step_layer(0, w, g, 1.0f, 1.0, 1);
  const float polar[4] = {0, -1, 1, 0};
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(-w[i], polar[i], 1e-6) << i;
}

TEST(Soap, MatchesReference) {
  ref::Hyper h{0.95, 0.95, 0.95, 1e-8};
  h.freq = 2;
  h.weight_decay = 0.01;
  compare_with_reference<ref::Soap>("soap", h, 6, 5, 3, 9, 1e-4);
  // Unequal betas and a single block with frequency 3.
  ref::Hyper h2{0.9, 0.99, 0.8, 1e-8};
  h2.freq = 3;
  compare_with_reference<ref::Soap>("soap", h2, 5, 4, 8, 10, 1e-4);
}

TEST(KLShampoo, MatchesReference) {
  ref::Hyper h{0.9, 0.98, 0.98, 1e-8};
  h.freq = 2;
  h.weight_decay = 0.01;
  compare_with_reference<ref::KLShampoo>("kl_shampoo", h, 6, 5, 3, 9, 1e-4);
  ref::Hyper h2{0.9, 0.9, 0.9, 1e-8};
  h2.freq = 3;
  compare_with_reference<ref::KLShampoo>("kl_shampoo", h2, 5, 4, 8, 10, 1e-4);
}

// Staggered: four blocks over a period of 4 refresh one per step, so with two threads each runs
// alone after the block loop, with BLAS on both threads (second_order.cpp).
TEST(SecondOrder, StaggeredMatchesReference) {
  const int threads = omp_get_max_threads();
  omp_set_num_threads(2);
  ref::Hyper h{0.9, 0.98, 0.95, 1e-8};
  h.root_eps = 1e-6;
  h.freq = 4;
  h.start = 2;
  h.weight_decay = 0.01;
  compare_with_reference<ref::Shampoo>("shampoo", h, 6, 5, 3, 10, 1e-4, true);
  compare_with_reference<ref::Soap>("soap", h, 6, 5, 3, 10, 1e-4, true);
  compare_with_reference<ref::KLShampoo>("kl_shampoo", h, 6, 5, 3, 10, 1e-4, true);
  omp_set_num_threads(threads);
}

TEST(Soap, FirstCallLeavesWeightsUnchanged) {
  for (const char* algo : {"soap", "kl_shampoo"}) {
    ParamTable t;
    t.add("w", {4, 3}, ParamClass::Matrix);
    ref::Hyper h{0.95, 0.95, 0.95, 1e-8};
    h.weight_decay = 0.5;
    SecondOrderOptimizer opt(params_for(algo, h, 8), {t});
    std::vector<float> w = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, w0 = w;
    auto g = random_grads(2, 4, 3, 1);
    opt.step_layer(0, w.data(), g[0].data(), 1.0f, 0.1, 1);
    EXPECT_EQ(w, w0) << algo;
    opt.step_layer(0, w.data(), g[1].data(), 1.0f, 0.1, 2);
    EXPECT_NE(w, w0) << algo;
  }
}

namespace {

// The first moment of a SOAP block in the original space: Q_L M Q_R^T.
std::vector<double> soap_moment_original(const SoapBlock& b) {
  const int64_t m = b.rows(), n = b.cols();
  std::vector<double> out(m * n, 0.0), tmp(m * n, 0.0);
  const float *QL = b.left_basis(), *QR = b.right_basis(), *M = b.first_moment();
  for (int64_t i = 0; i < m; ++i)
    for (int64_t k = 0; k < m; ++k)
      for (int64_t j = 0; j < n; ++j) tmp[i * n + j] += QL[i * m + k] * M[k * n + j];
  for (int64_t i = 0; i < m; ++i)
    for (int64_t k = 0; k < n; ++k)
      for (int64_t j = 0; j < n; ++j) out[i * n + j] += tmp[i * n + k] * QR[j * n + k];
  return out;
}

}  // namespace

TEST(Soap, UpdateIsInvariantToEigenvectorSignsAndRefreshKeepsTheMoment) {
  PreconditionerParams p;
  p.beta1 = 0.9;
  p.beta2 = 0.95;
  p.shampoo_beta = 0.95;
  p.precondition_frequency = 1000;
  SoapBlock a("a", 4, 3, p), b("b", 4, 3, p);
  RefreshJob job;
  matfn::Workspace ws;
  auto g = random_grads(6, 4, 3, 9);
  for (int s = 0; s < 4; ++s) {
    a.step(g[s].data(), job, ws, /*refresh=*/false);
    b.step(g[s].data(), job, ws, /*refresh=*/false);
  }
  // Flip the signs of some eigenvectors of b (a "refresh" to the same basis up to signs).
  auto before = soap_moment_original(b);
  b.snapshot(job);
  for (int i = 0; i < 4; ++i) job.left_basis[i * 4 + 1] *= -1;
  for (int i = 0; i < 3; ++i) job.right_basis[i * 3 + 2] *= -1;
  job.left_perm = {0, 1, 2, 3};
  job.right_perm = {0, 1, 2};
  job.status = matfn::Status::Ok;
  b.publish(job);
  auto after = soap_moment_original(b);
  for (size_t i = 0; i < before.size(); ++i) EXPECT_NEAR(after[i], before[i], 1e-6);
  for (int s = 4; s < 6; ++s) {
    a.step(g[s].data(), job, ws, false);
    b.step(g[s].data(), job, ws, false);
    for (int i = 0; i < 12; ++i) EXPECT_NEAR(a.direction()[i], b.direction()[i], 1e-5) << "step " << s;
  }
  // A real refresh (new basis, re-sorted) keeps the first moment in the original space.
  before = soap_moment_original(a);
  a.snapshot(job);
  a.compute_refresh(job, ws);
  ASSERT_EQ(job.status, matfn::Status::Ok);
  a.publish(job);
  after = soap_moment_original(a);
  for (size_t i = 0; i < before.size(); ++i) EXPECT_NEAR(after[i], before[i], 1e-5);
}

TEST(SecondOrder, RankDeficientFactorKeepsPreviousRootAndCountsUntilTheLimit) {
  ParamTable t;
  t.add("w", {3, 3}, ParamClass::Matrix);
  ref::Hyper h{0.0, 0.99, 1.0, 1e-8};
  h.root_eps = 0;  // no regularization: a singular factor has no inverse root
  auto p = params_for("shampoo", h, 8);
  p.precond.max_failures = 2;
  SecondOrderOptimizer opt(p, {t});
  std::vector<float> w(9, 0.0f);
  const std::vector<float> rank1 = {1, 2, 3, 2, 4, 6, 3, 6, 9};  // u v^T
  opt.step_layer(0, w.data(), rank1.data(), 1.0f, 0.1, 1);
  EXPECT_EQ(opt.preconditioner(0, 0).consecutive_failures(), 1);
  for (float x : w) EXPECT_TRUE(std::isfinite(x));
  opt.step_layer(0, w.data(), rank1.data(), 1.0f, 0.1, 2);
  EXPECT_EQ(opt.preconditioner(0, 0).consecutive_failures(), 2);
  try {
    opt.step_layer(0, w.data(), rank1.data(), 1.0f, 0.1, 3);
    FAIL() << "expected an error after 3 failures in a row";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("w[0]: rows 0-2, cols 0-2"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("3 times in a row"), std::string::npos) << e.what();
  }
  // With a root epsilon the same factor is fine.
  h.root_eps = 1e-6;
  SecondOrderOptimizer ok(params_for("shampoo", h, 8), {t});
  ok.step_layer(0, w.data(), rank1.data(), 1.0f, 0.1, 1);
  EXPECT_EQ(ok.preconditioner(0, 0).consecutive_failures(), 0);
  EXPECT_EQ(ok.preconditioner(0, 0).refresh_count(), 1);
}

TEST(SecondOrder, NonFiniteGradientSkipsTheBlockAndNeverReachesWeights) {
  for (const char* algo : {"shampoo", "soap", "kl_shampoo"}) {
    ParamTable t;
    t.add("w", {4, 3}, ParamClass::Matrix);
    ref::Hyper h{0.9, 0.95, 0.95, 1e-8};
    h.root_eps = 1e-6;
    h.freq = 1;
    auto p = params_for(algo, h, 8);
    p.precond.max_failures = 1;
    auto g = random_grads(3, 4, 3, 2);
    std::vector<float> nan(12, 1.0f);
    nan[5] = std::numeric_limits<float>::quiet_NaN();
    // A: g0, NaN, g1, g2   B: g0, g1, g2  -> identical weights.
    SecondOrderOptimizer a(p, {t}), b(p, {t});
    std::vector<float> wa(12, 0.5f), wb(12, 0.5f);
    a.step_layer(0, wa.data(), g[0].data(), 1.0f, 0.1, 1);
    a.step_layer(0, wa.data(), nan.data(), 1.0f, 0.1, 2);
    a.step_layer(0, wa.data(), g[1].data(), 1.0f, 0.1, 3);
    a.step_layer(0, wa.data(), g[2].data(), 1.0f, 0.1, 4);
    for (int s = 0; s < 3; ++s) b.step_layer(0, wb.data(), g[s].data(), 1.0f, 0.1, s + 1);
    EXPECT_EQ(wa, wb) << algo;
    // Two non-finite gradients in a row exceed max_failures = 1.
    a.step_layer(0, wa.data(), nan.data(), 1.0f, 0.1, 5);
    EXPECT_THROW(a.step_layer(0, wa.data(), nan.data(), 1.0f, 0.1, 6), Error) << algo;
    for (float x : wa) EXPECT_TRUE(std::isfinite(x));
  }
}

TEST(SecondOrder, InjectedEighFailureKeepsRootsThenRecovers) {
  ParamTable t;
  t.add("w", {3, 3}, ParamClass::Matrix);
  ref::Hyper h{0.9, 0.95, 0.95, 1e-8};
  h.root_eps = 1e-6;
  auto p = params_for("shampoo", h, 8);
  p.precond.max_failures = 1;
  SecondOrderOptimizer opt(p, {t});
  auto g = random_grads(4, 3, 3, 4);
  std::vector<float> w(9, 0.0f);
  opt.step_layer(0, w.data(), g[0].data(), 1.0f, 0.1, 1);
  EXPECT_EQ(opt.preconditioner(0, 0).refresh_count(), 1);
  matfn::inject_eigh_failures(1);
  opt.step_layer(0, w.data(), g[1].data(), 1.0f, 0.1, 2);
  EXPECT_EQ(opt.preconditioner(0, 0).consecutive_failures(), 1);
  EXPECT_EQ(opt.preconditioner(0, 0).refresh_count(), 1);   // previous roots kept
  opt.step_layer(0, w.data(), g[2].data(), 1.0f, 0.1, 3);
  EXPECT_EQ(opt.preconditioner(0, 0).consecutive_failures(), 0);
  EXPECT_EQ(opt.preconditioner(0, 0).refresh_count(), 2);
  matfn::inject_eigh_failures(4);
  opt.step_layer(0, w.data(), g[3].data(), 1.0f, 0.1, 4);
  EXPECT_THROW(opt.step_layer(0, w.data(), g[3].data(), 1.0f, 0.1, 5), Error);
  matfn::inject_eigh_failures(0);
  for (float x : w) EXPECT_TRUE(std::isfinite(x));
}
