// Shampoo, SOAP and KL-Shampoo against the fp64 references, hand-derived cases, invariants and
// failure paths.
#include <gtest/gtest.h>

#include <omp.h>

#include <cmath>
#include <limits>
#include <random>
#include <stdexcept>

#include "core/error.hpp"
#include "optim/second_order.hpp"
#include "optim/eigenbasis.hpp"
#include "optim/soap.hpp"
#include "reference_optimizers.hpp"

using namespace asteria;
namespace ref = asteria::reference;

namespace {

// The optimizer a test case names as optim.name spells it.
OptimizerKind optimizer_named(const std::string& name) {
  for (OptimizerKind k : {OptimizerKind::AdamW, OptimizerKind::Shampoo, OptimizerKind::Soap, OptimizerKind::KlShampoo})
    if (name == to_string(k)) return k;
  throw std::invalid_argument("no optimizer named " + name);
}

SecondOrderParams params_for(const std::string& algo, const ref::Hyper& h, int64_t max_dim) {
  SecondOrderParams p;
  p.algorithm = optimizer_named(algo);
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
                            int steps, double rel_tol, bool stagger = false,
                            matfn::Precision refresh_dtype = matfn::Precision::Float64) {
  ParamTable t;
  t.add("w", {m, n}, ParamClass::Matrix);
  SecondOrderParams p = params_for(algo, h, max_dim);
  p.stagger = stagger;
  p.precond.refresh_dtype = refresh_dtype;
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
          x = Ref::apply(x, D(i, j), lr, h.weight_decay);
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

// The parameters after `steps` steps of the production optimizer from the same start and
// gradients as compare_with_reference, with refresh_dtype fp64 and fp32.
struct Fp64AndFp32 {
  std::vector<float> w0, w64, w32;
};
Fp64AndFp32 run_fp64_and_fp32(SecondOrderParams p, int m, int n, int steps) {
  ParamTable t;
  t.add("w", {m, n}, ParamClass::Matrix);
  Fp64AndFp32 r;
  r.w0.resize(static_cast<size_t>(m) * n);
  std::mt19937 rng(11);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (auto& x : r.w0) x = nd(rng);
  auto grads = random_grads(steps, m, n, 5);
  for (auto dtype : {matfn::Precision::Float64, matfn::Precision::Float32}) {
    p.precond.refresh_dtype = dtype;
    SecondOrderOptimizer opt(p, {t});
    std::vector<float>& w = dtype == matfn::Precision::Float64 ? r.w64 : r.w32;
    w = r.w0;
    for (int s = 0; s < steps; ++s) opt.step_layer(0, w.data(), grads[s].data(), 1.0f, 0.05, s + 1);
  }
  return r;
}

// fp32 refreshes change the parameters (the option takes effect), by little: at most rel_tol of
// the largest displacement of the fp64 run.
void expect_fp32_differs_but_close(const Fp64AndFp32& r, double rel_tol, const std::string& what) {
  double diff = 0, size = 0;
  for (size_t i = 0; i < r.w0.size(); ++i) {
    diff = std::max(diff, std::abs(static_cast<double>(r.w32[i]) - r.w64[i]));
    size = std::max(size, std::abs(static_cast<double>(r.w64[i]) - r.w0[i]));
  }
  EXPECT_GT(diff, 0.0) << what << ": float32 and float64 refreshes gave the same bits";
  EXPECT_LE(diff, rel_tol * size) << what;
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

TEST(Shampoo, StartNotAMultipleOfTheFrequencyMatchesReference) {
  // Distributed Shampoo's schedule: roots at S = 4, then at 6, 9, 12 (not 7, 10, 13).
  ref::Hyper h{0.9, 0.999, 0.95, 1e-10};
  h.root_eps = 1e-6;
  h.freq = 3;
  h.start = 4;
  h.weight_decay = 0.1;
  compare_with_reference<ref::Shampoo>("shampoo", h, 6, 5, 3, 13, 1e-4);
}

TEST(WeightDecayOrder, ShampooDecaysTheWeightsBeforeTheStep) {
  // With a large lr * wd the two orders differ by lr^2 wd |D| per step; only Distributed
  // Shampoo's, W - lr (D + wd W), matches the Shampoo reference.
  ref::Hyper h{0.9, 0.999, 0.95, 1e-10};
  h.root_eps = 1e-6;
  h.freq = 2;
  h.weight_decay = 2.0;
  compare_with_reference<ref::Shampoo>("shampoo", h, 4, 3, 8, 6, 1e-4);
  compare_with_reference<ref::Soap>("soap", h, 4, 3, 8, 6, 1e-4);
  compare_with_reference<ref::KLShampoo>("kl_shampoo", h, 4, 3, 8, 6, 1e-4);
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

// A layer's blocks are stepped in parallel and their factor statistics run as tasks that any
// thread of the team may take (optim/run_beside.hpp): the weights after steps with refreshes are
// the same bits on one thread as on two or more.
TEST(SecondOrder, FactorStatisticsOnAnyThreadGiveOneThreadsBits) {
  ParamTable t;
  t.add("big", {96, 40}, ParamClass::Matrix);   // two 48 x 40 blocks
  t.add("small", {12, 8}, ParamClass::Matrix);
  ref::Hyper h{0.9, 0.95, 0.95, 1e-8};
  h.root_eps = 1e-6;
  h.freq = 3;
  h.weight_decay = 0.01;
  const int threads = omp_get_max_threads();
  for (const char* algo : {"shampoo", "soap", "kl_shampoo"}) {
    std::vector<float> w_at[2];
    for (int team : {1, std::max(2, threads)}) {
      omp_set_num_threads(team);
      SecondOrderOptimizer opt(params_for(algo, h, 48), {t});
      std::vector<float>& w = w_at[team == 1 ? 0 : 1];
      w.assign(static_cast<size_t>(t.numel), 0.5f);
      const auto grads = random_grads(8, 1, static_cast<int>(t.numel), 9);
      for (int s = 0; s < 8; ++s) opt.step_layer(0, w.data(), grads[s].data(), 1.0f, 0.05, s + 1);
    }
    omp_set_num_threads(threads);
    EXPECT_EQ(w_at[0], w_at[1]) << algo;
    EXPECT_NE(w_at[1], std::vector<float>(w_at[1].size(), 0.5f)) << algo;
  }
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
    // The direction lives in the thread's scratch until it steps another block.
    const std::vector<float> a_direction(a.direction(), a.direction() + 12);
    b.step(g[s].data(), job, ws, false);
    for (int i = 0; i < 12; ++i) EXPECT_NEAR(a_direction[i], b.direction()[i], 1e-5) << "step " << s;
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

// Coherence with staleness > 1: an owner that drops a version continues from it. Dropping the
// first of two refreshes and installing the second must give the bases a block installing both
// has, bit for bit (the kept version is rounded as an install rounds it), with the second job's
// permutation composed onto the installed columns: p[k] = p1[p2[k]]. SOAP only: its factors are
// statistics of the gradients alone, while KL-Shampoo's are taken in the installed basis, so a
// block that installed less has other factors there.
TEST(Soap, ARefreshContinuingFromADroppedVersionWalksTheInstallingChain) {
  for (const std::string algo : {"soap"}) {
    PreconditionerParams p;
    p.beta2 = 0.95;
    p.shampoo_beta = 0.9;
    const int m = 6, n = 5;
    auto installs = make_preconditioner(optimizer_named(algo), "a", m, n, p), drops = make_preconditioner(optimizer_named(algo), "b", m, n, p);
    auto* a = dynamic_cast<EigenbasisBlock*>(installs.get());
    auto* b = dynamic_cast<EigenbasisBlock*>(drops.get());
    ASSERT_TRUE(a && b);
    RefreshJob job, first, second, kept;
    matfn::Workspace ws;
    const auto g = random_grads(9, m, n, 17);
    // Both blocks take gradients from..to - 1 without refreshing.
    const auto step_both = [&](int from, int to) {
      for (int s = from; s < to; ++s) {
        a->step(g[s].data(), job, ws, false);
        b->step(g[s].data(), job, ws, false);
      }
    };
    step_both(0, 3);
    // Refresh 1: a installs it; b computes the same and keeps it.
    a->snapshot(first);
    a->compute_refresh(first, ws);
    a->publish(first);
    b->snapshot(job);
    b->compute_refresh(job, ws);
    ASSERT_EQ(job.status, matfn::Status::Ok);
    ASSERT_TRUE(b->keep_dropped(job, kept));
    step_both(3, 6);
    // Refresh 2: a from its installed basis, b from the kept one.
    a->snapshot(second);
    a->compute_refresh(second, ws);
    b->snapshot(job);
    b->continue_from(kept, job);
    b->compute_refresh(job, ws);
    ASSERT_EQ(job.status, matfn::Status::Ok);
    EXPECT_EQ(job.left_basis, second.left_basis) << algo;
    EXPECT_EQ(job.right_basis, second.right_basis) << algo;
    const auto composed = [](const std::vector<int>& p1, const std::vector<int>& p2) {
      std::vector<int> c(p2.size());
      for (size_t k = 0; k < p2.size(); ++k) c[k] = p1[p2[k]];
      return c;
    };
    EXPECT_EQ(job.left_perm, composed(first.left_perm, second.left_perm)) << algo;
    EXPECT_EQ(job.right_perm, composed(first.right_perm, second.right_perm)) << algo;
    a->publish(second);
    b->publish(job);
    for (int i = 0; i < m * m; ++i) ASSERT_EQ(a->left_basis()[i], b->left_basis()[i]) << algo;
    for (int i = 0; i < n * n; ++i) ASSERT_EQ(a->right_basis()[i], b->right_basis()[i]) << algo;
  }
  // Shampoo's roots come from the factors alone: nothing to keep.
  PreconditionerParams p;
  auto shampoo = make_preconditioner(OptimizerKind::Shampoo, "s", 4, 3, p);
  RefreshJob job, kept;
  EXPECT_FALSE(shampoo->keep_dropped(job, kept));
}

// runtime.coherence.tolerance's measure, by hand. SOAP and KL-Shampoo: both factors F = R diag(4,
// 1) R^T with R a rotation by theta; in the installed identity basis the off-diagonal entries are
// (4 - 1) sin(theta) cos(theta) = 1.5 sin(2 theta), so the off-diagonal share over both sides is
// sqrt(2 * 2.25 sin^2(2 theta) / 17) = 1.5 / sqrt(17) at theta = pi / 8; in the eigenbasis R, 0.
// Shampoo: roots 2 I against installed I, ||2I - I|| / ||I|| = 1.
TEST(SecondOrder, RefreshChangeMeasuresByHand) {
  const double th = M_PI / 8, c = std::cos(th), sn = std::sin(th);
  const std::vector<double> F = {4 * c * c + sn * sn, 3 * c * sn, 3 * c * sn, 4 * sn * sn + c * c};
  for (const std::string algo : {"soap", "kl_shampoo"}) {
    auto b = make_preconditioner(optimizer_named(algo), "b", 2, 2, PreconditionerParams{});
    RefreshJob job;
    job.rows = job.cols = 2;
    job.left = job.right = F;
    EXPECT_TRUE(std::isinf(b->refresh_change(job))) << "nothing installed";
    job.installed_left = job.installed_right = {1, 0, 0, 1};
    EXPECT_NEAR(b->refresh_change(job), 1.5 / std::sqrt(17.0), 1e-12) << algo;
    const float fc = static_cast<float>(c), fs = static_cast<float>(sn);
    job.installed_left = job.installed_right = {fc, -fs, fs, fc};   // columns: the eigenvectors
    EXPECT_NEAR(b->refresh_change(job), 0.0, 1e-6) << algo;
  }
  auto shampoo = make_preconditioner(OptimizerKind::Shampoo, "s", 2, 2, PreconditionerParams{});
  RefreshJob job;
  job.rows = job.cols = 2;
  job.left_root = job.right_root = {2, 0, 0, 2};
  job.installed_left = job.installed_right = {1, 0, 0, 1};
  EXPECT_NEAR(shampoo->refresh_change(job), 1.0, 1e-12);
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

// optim.refresh_dtype float32: roots / bases computed in fp32 still follow the fp64 references,
// and differ from the fp64 refresh (the option takes effect) by little. Measured relative errors
// against the references: about 1e-5 for 3 x 3 blocks, up to 2e-4 for SOAP's 16 x 15 block
// (fp64 there: 3e-5); the tolerance leaves room for fp32 roundoff in the refresh, amplified where
// eigenvalues are close, while a wrong basis or root is off by O(1).
constexpr double kFp32Tol = 1e-3;

TEST(Shampoo, Float32RefreshMatchesReferenceAndDiffersFromFloat64) {
  ref::Hyper h{0.9, 0.999, 0.95, 1e-8};
  h.root_eps = 1e-6;
  h.freq = 2;
  h.start = 2;
  h.weight_decay = 0.1;
  const auto f32 = matfn::Precision::Float32;
  compare_with_reference<ref::Shampoo>("shampoo", h, 6, 5, 3, 7, kFp32Tol, false, f32);
  compare_with_reference<ref::Shampoo>("shampoo", h, 16, 15, 16, 7, kFp32Tol, false, f32);
  expect_fp32_differs_but_close(run_fp64_and_fp32(params_for("shampoo", h, 3), 6, 5, 7), kFp32Tol, "shampoo");
  expect_fp32_differs_but_close(run_fp64_and_fp32(params_for("shampoo", h, 16), 16, 15, 7), kFp32Tol,
                                "shampoo 16 x 15");
  // The coupled Newton iteration in fp32 (with its fp32 tolerance) as well.
  auto p = params_for("shampoo", h, 16);
  p.precond.root_method = RootMethod::Newton;
  expect_fp32_differs_but_close(run_fp64_and_fp32(p, 16, 15, 7), kFp32Tol, "shampoo newton");
}

TEST(Soap, Float32RefreshMatchesReferenceAndDiffersFromFloat64) {
  ref::Hyper h{0.95, 0.95, 0.95, 1e-8};
  h.freq = 2;
  h.weight_decay = 0.01;
  const auto f32 = matfn::Precision::Float32;
  compare_with_reference<ref::Soap>("soap", h, 6, 5, 3, 9, kFp32Tol, false, f32);
  compare_with_reference<ref::Soap>("soap", h, 16, 15, 16, 9, kFp32Tol, false, f32);
  expect_fp32_differs_but_close(run_fp64_and_fp32(params_for("soap", h, 3), 6, 5, 9), kFp32Tol, "soap");
  expect_fp32_differs_but_close(run_fp64_and_fp32(params_for("soap", h, 16), 16, 15, 9), kFp32Tol,
                                "soap 16 x 15");
  // No refresh within the run: only the initial eigenbasis is computed, in fp32 too.
  h.freq = 1000;
  expect_fp32_differs_but_close(run_fp64_and_fp32(params_for("soap", h, 8), 6, 5, 4), kFp32Tol,
                                "soap initial basis");
}

TEST(KLShampoo, Float32RefreshMatchesReferenceAndDiffersFromFloat64) {
  ref::Hyper h{0.9, 0.98, 0.98, 1e-8};
  h.freq = 2;
  h.weight_decay = 0.01;
  const auto f32 = matfn::Precision::Float32;
  compare_with_reference<ref::KLShampoo>("kl_shampoo", h, 6, 5, 3, 9, kFp32Tol, false, f32);
  compare_with_reference<ref::KLShampoo>("kl_shampoo", h, 16, 15, 16, 9, kFp32Tol, false, f32);
  expect_fp32_differs_but_close(run_fp64_and_fp32(params_for("kl_shampoo", h, 3), 6, 5, 9), kFp32Tol,
                                "kl_shampoo");
  expect_fp32_differs_but_close(run_fp64_and_fp32(params_for("kl_shampoo", h, 16), 16, 15, 9), kFp32Tol,
                                "kl_shampoo 16 x 15");
  h.freq = 1000;
  expect_fp32_differs_but_close(run_fp64_and_fp32(params_for("kl_shampoo", h, 8), 6, 5, 4), kFp32Tol,
                                "kl_shampoo initial basis");
}

// The refresh itself (not only the initial basis) honors refresh_dtype: the same snapshot
// computed by a float64 and a float32 block gives results that differ, but only by fp32 roundoff.
TEST(SecondOrder, Float32ComputeRefreshDiffersFromFloat64ButIsClose) {
  for (const char* algo : {"shampoo", "soap", "kl_shampoo"}) {
    PreconditionerParams p64;
    p64.beta1 = 0.9;
    p64.beta2 = 0.95;
    p64.shampoo_beta = 0.95;
    p64.root_eps = 1e-6;
    PreconditionerParams p32 = p64;
    p32.refresh_dtype = matfn::Precision::Float32;
    const int m = 16, n = 15;
    auto b64 = make_preconditioner(optimizer_named(algo), "b", m, n, p64);
    auto b32 = make_preconditioner(optimizer_named(algo), "b", m, n, p32);
    RefreshJob job;
    matfn::Workspace ws;
    auto g = random_grads(4, m, n, 6);
    for (auto& gs : g) b64->step(gs.data(), job, ws, /*refresh=*/false);
    b64->snapshot(job);
    RefreshJob job32 = job;
    b64->compute_refresh(job, ws);
    b32->compute_refresh(job32, ws);
    ASSERT_EQ(job.status, matfn::Status::Ok) << algo;
    ASSERT_EQ(job32.status, matfn::Status::Ok) << algo;
    const bool roots = std::string(algo) == "shampoo";
    for (int side = 0; side < 2; ++side) {
      const auto& x64 = roots ? (side ? job.right_root : job.left_root) : (side ? job.right_basis : job.left_basis);
      const auto& x32 = roots ? (side ? job32.right_root : job32.left_root)
                              : (side ? job32.right_basis : job32.left_basis);
      double diff = 0, size = 0;
      for (size_t i = 0; i < x64.size(); ++i) {
        diff = std::max(diff, std::abs(x32[i] - x64[i]));
        size = std::max(size, std::abs(x64[i]));
      }
      EXPECT_GT(diff, 0.0) << algo << " side " << side << ": the float32 refresh gave fp64's bits";
      EXPECT_LE(diff, 1e-4 * size) << algo << " side " << side;
    }
    EXPECT_EQ(job32.left_perm, job.left_perm) << algo;
    EXPECT_EQ(job32.right_perm, job.right_perm) << algo;
  }
}

// A refresh in parts (runtime.shadow.lane compute spreads them over steps and threads) gives
// compute_refresh's bits when the parts of two blocks interleave on workspaces that each part
// finds overwritten by the other block: nothing a part hands the next may live in the workspace.
TEST(SecondOrder, RefreshInPartsOnSharedWorkspacesGivesOneCallsBits) {
  struct Case {
    const char* algo;
    matfn::Precision precision;
    RootMethod method;
    bool beyond_fp32 = false;   // a factor fp32 cannot hold: the last part retries in fp64
  };
  const auto f32 = matfn::Precision::Float32, f64 = matfn::Precision::Float64;
  for (const Case& c : {Case{"shampoo", f64, RootMethod::Eigh}, Case{"shampoo", f32, RootMethod::Eigh},
                        Case{"shampoo", f32, RootMethod::Newton}, Case{"soap", f64, RootMethod::Eigh},
                        Case{"soap", f32, RootMethod::Eigh}, Case{"kl_shampoo", f32, RootMethod::Eigh},
                        Case{"shampoo", f32, RootMethod::Eigh, true}, Case{"soap", f32, RootMethod::Eigh, true}}) {
    PreconditionerParams p;
    p.beta1 = 0.9;
    p.beta2 = 0.95;
    p.shampoo_beta = 0.95;
    p.root_eps = 1e-6;
    p.refresh_dtype = c.precision;
    p.root_method = c.method;
    const std::string what = std::string(c.algo) + (c.precision == f32 ? " fp32" : " fp64") +
                             (c.method == RootMethod::Newton ? " newton" : "") + (c.beyond_fp32 ? " beyond fp32" : "");
    auto a = make_preconditioner(optimizer_named(c.algo), "a", 16, 15, p);
    auto b = make_preconditioner(optimizer_named(c.algo), "b", 9, 20, p);
    ASSERT_EQ(static_cast<size_t>(a->refresh_parts()), refresh_part_costs(optimizer_named(c.algo), 16, 15).size()) << what;
    RefreshJob ja, jb, scratch;
    matfn::Workspace ws[2];
    auto ga = random_grads(4, 16, 15, 6), gb = random_grads(4, 9, 20, 7);
    for (int s = 0; s < 4; ++s) {
      a->step(ga[s].data(), scratch, ws[0], /*refresh=*/false);
      b->step(gb[s].data(), scratch, ws[0], /*refresh=*/false);
    }
    a->snapshot(ja);
    b->snapshot(jb);
    if (c.beyond_fp32)
      for (double& x : ja.left) x *= 1e40;
    const RefreshJob snapshot_a = ja;
    RefreshJob one_a = ja, one_b = jb;
    a->compute_refresh(one_a, ws[0]);
    b->compute_refresh(one_b, ws[1]);
    ASSERT_EQ(one_a.status, matfn::Status::Ok) << what;
    for (int part = 0; part < a->refresh_parts(); ++part) {
      a->compute_refresh_part(ja, part, ws[part % 2]);
      b->compute_refresh_part(jb, part, ws[(part + 1) % 2]);
    }
    for (const auto& [parts, one] : {std::pair{&ja, &one_a}, std::pair{&jb, &one_b}}) {
      EXPECT_EQ(parts->status, one->status) << what;
      EXPECT_EQ(parts->left_root, one->left_root) << what;
      EXPECT_EQ(parts->right_root, one->right_root) << what;
      EXPECT_EQ(parts->left_basis, one->left_basis) << what;
      EXPECT_EQ(parts->right_basis, one->right_basis) << what;
      EXPECT_EQ(parts->left_perm, one->left_perm) << what;
      EXPECT_EQ(parts->right_perm, one->right_perm) << what;
    }
    // The parts did refresh: roots were written, bases moved.
    if (std::string(c.algo) == "shampoo") EXPECT_EQ(ja.left_root.size(), 16u * 16u) << what;
    else EXPECT_NE(ja.left_basis, snapshot_a.left_basis) << what;
  }
}
