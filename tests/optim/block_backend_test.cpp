// The block backend seam (optim/block_backend.hpp). The second-order optimizers' device code
// path (blocks one after another, the gradient block and the direction in backend scratch, the
// state read and written only through the backend, the first eigenbases from copies, the native
// refreshes by the backend's own solvers) is run here on host memory, by a backend that only
// claims to be a device: for SOAP, Shampoo and KL-Shampoo it must give the host path's bits. The
// CUDA backend itself is checked against the host in tests/cuda/second_order_cuda_test.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <stdexcept>

#include <omp.h>

#include <array>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "core/buffer.hpp"
#include "core/error.hpp"
#include "optim/block_backend.hpp"
#include "optim/second_order.hpp"

using namespace asteria;

namespace {

// The host's operations behind on_device() = true, with scratch of its own (all six slots).
class HostMemoryAsDevice final : public BlockBackend {
 public:
  bool on_device() const override { return true; }
  float* scratch(int slot, size_t count) const override {
    static thread_local std::array<Buffer<float>, kSlots> slots;
    Buffer<float>& b = slots.at(static_cast<size_t>(slot));
    if (b.size() < count) b.resize(count);
    return b.data();
  }
  void to_host(float* h, const float* x, size_t n) const override { host().to_host(h, x, n); }
  void from_host(float* x, const float* h, size_t n) const override { host().from_host(x, h, n); }
  void to_host_double(const float* x, size_t n, double* h) const override { host().to_host_double(x, n, h); }
  void from_host_double(float* x, const double* h, size_t n) const override { host().from_host_double(x, h, n); }
  void copy(float* d, const float* s, size_t n) const override { host().copy(d, s, n); }
  bool scaled_copy_finite(const float* src, int64_t ld, int64_t rows, int64_t cols, float s, float* dst) const override {
    return host().scaled_copy_finite(src, ld, rows, cols, s, dst);
  }
  void scale(float* x, size_t n, float s) const override { host().scale(x, n, s); }
  void mul(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* A, const float* B, float beta,
           float* C) const override {
    matmul_flops += 2.0 * m * n * k;
    host().mul(ta, tb, m, n, k, alpha, A, B, beta, C);
  }
  void ema(float* x, const float* y, size_t n, float b, float a) const override { host().ema(x, y, n, b, a); }
  void shampoo_moments(float* M, float* V, const float* G, int64_t mn, float b1, float b2, float ma,
                       float va) const override {
    host().shampoo_moments(M, V, G, mn, b1, b2, ma, va);
  }
  double adam_direction(const float* M, const float* V, int64_t mn, float i1, float i2, float eps, bool graft,
                        float* A) const override {
    return host().adam_direction(M, V, mn, i1, i2, eps, graft, A);
  }
  double sum_of_squares(const float* x, int64_t n) const override { return host().sum_of_squares(x, n); }
  void kl_damp(float* P, const float* dL, const float* dR, int64_t m, int64_t n, float damping) const override {
    host().kl_damp(P, dL, dR, m, n, damping);
  }
  void kl_factor_diagonals(const float* H, const float* dL, const float* dR, int64_t m, int64_t n, double* l,
                           double* r) const override {
    host().kl_factor_diagonals(H, dL, dR, m, n, l, r);
  }
  void scale_columns(float* X, const float* s, int64_t m, int64_t n) const override { host().scale_columns(X, s, m, n); }
  void scale_rows(float* X, const float* s, int64_t m, int64_t n) const override { host().scale_rows(X, s, m, n); }
  void accumulate_left(const float* G, int64_t m, int64_t n, float b, float s, float* L) const override {
    matmul_flops += 1.0 * m * m * n;   // G G^T's upper triangle (ssyrk)
    host().accumulate_left(G, m, n, b, s, L);
  }
  void accumulate_right(const float* G, int64_t m, int64_t n, float b, float s, float* R) const override {
    matmul_flops += 1.0 * m * n * n;   // G^T G's
    host().accumulate_right(G, m, n, b, s, R);
  }
  void to_basis(const float* QL, const float* X, const float* QR, int64_t m, int64_t n, float* t, float* o) const override {
    matmul_flops += 2.0 * m * m * n + 2.0 * m * n * n;   // QL^T X, then QR
    host().to_basis(QL, X, QR, m, n, t, o);
  }
  void from_basis(const float* QL, const float* X, const float* QR, int64_t m, int64_t n, float* t,
                  float* o) const override {
    matmul_flops += 2.0 * m * m * n + 2.0 * m * n * n;
    host().from_basis(QL, X, QR, m, n, t, o);
  }
  void soap_moments(float* M, float* V, float* G, int64_t mn, float b1, float b2, float a1, float a2,
                    float eps) const override {
    host().soap_moments(M, V, G, mn, b1, b2, a1, a2, eps);
  }
  // The native refresh's solvers "of the device": the host's matrix functions in one call (which
  // the parts the host path runs give bit for bit), counted.
  bool qr_refresh(matfn::Precision precision, int n, const double* L, double* Q, std::vector<int>& perm, bool sort,
                  matfn::Status& status) const override {
    static thread_local matfn::Workspace ws;
    status = matfn::qr_refresh(precision, n, L, Q, perm, ws, sort);
    ++refreshes_computed;
    return true;
  }
  bool inverse_root(matfn::Precision precision, int n, const double* A, double p, double eps, double* out,
                    matfn::Status& status) const override {
    static thread_local matfn::Workspace ws;
    status = matfn::inverse_root_eigh(precision, n, A, p, eps, out, ws);
    ++refreshes_computed;
    return true;
  }
  mutable int refreshes_computed = 0;
  mutable double matmul_flops = 0;   // every product the blocks asked for: 2 m n k, a rank-k update's half

  matfn::Status initial_eigenbasis(int64_t d, const float* F, float* Q, matfn::Precision p) const override {
    return host().initial_eigenbasis(d, F, Q, p);
  }
  void permute(const float* X, const std::vector<int>& r, const std::vector<int>& c, int64_t m, int64_t n,
               float* o) const override {
    host().permute(X, r, c, m, n, o);
  }
  void apply_update(float* w, float* c, int64_t ld, const float* D, int64_t rows, int64_t cols, float lr, float lr_wd,
                    bool decay_first) const override {
    host().apply_update(w, c, ld, D, rows, cols, lr, lr_wd, decay_first);
  }
  void adamw_update(float* w, float* c, float* m, float* v, const float* g, float gs, size_t n,
                    const AdamWCoefficients& k) const override {
    host().adamw_update(w, c, m, v, g, gs, n, k);
  }

 private:
  static const BlockBackend& host() { return host_block_backend(); }
};

ParamTable a_layer() {
  ParamTable t;
  t.add("w", {48, 40}, ParamClass::Matrix);   // blocks of at most 32: 32x32, 32x8, 16x32, 16x8
  t.add("norm", {40}, ParamClass::Norm);      // the 1-D AdamW's
  return t;
}

// A layer whose blocks' first factors have full rank (four 64 x 64 blocks with
// max_preconditioner_dim 64): in a rank-deficient factor's null space the computed eigenvectors
// are rounding noise, and SOAP's per-coordinate Adam update sees which basis the noise chose at
// first order, so two roundings of a float32 refresh there give updates tens of percent apart
// (float64's noise is 1e-9 of float32's and stays below the eigensolvers' decisions).
ParamTable a_full_rank_layer() {
  ParamTable t;
  t.add("w", {128, 128}, ParamClass::Matrix);
  t.add("norm", {128}, ParamClass::Norm);
  return t;
}

// The optimizer a test case names as optim.name spells it.
OptimizerKind optimizer_named(const std::string& name) {
  for (OptimizerKind k : {OptimizerKind::AdamW, OptimizerKind::Shampoo, OptimizerKind::Soap, OptimizerKind::KlShampoo})
    if (name == to_string(k)) return k;
  throw std::invalid_argument("no optimizer named " + name);
}

// A case: the optimizer and optim.refresh_dtype (which the backend's own solvers must follow).
using Case = std::tuple<std::string, matfn::Precision>;

SecondOrderParams params_for(const Case& c) {
  SecondOrderParams p;
  p.algorithm = optimizer_named(std::get<0>(c));
  p.precond.refresh_dtype = std::get<1>(c);
  p.precond.precondition_frequency = 3;
  p.max_preconditioner_dim = 32;
  p.weight_decay = 0.1;
  p.stagger = true;
  return p;
}

}  // namespace

class DeviceCodePath : public ::testing::TestWithParam<Case> {};

// One layer's optimizer on the host path and on the device code path (host memory posing as
// device memory), and the layer's first weights.
struct TwoPaths {
  const HostMemoryAsDevice device;
  const ParamTable t;
  SecondOrderOptimizer on_host, on_device;
  std::vector<Buffer<float>> device_memory;
  std::mt19937 rng{3};
  std::normal_distribution<float> nd{0.0f, 1.0f};
  std::vector<float> w_host;
  explicit TwoPaths(const Case& c) : TwoPaths(params_for(c)) {}
  explicit TwoPaths(const SecondOrderParams& params, ParamTable layer = a_layer())
      : t(std::move(layer)),
        on_host(params, {t}), on_device(params, {t}, /*own_memory=*/false, device), w_host(t.numel) {
    for (StateTensor* s : on_device.layer_states(0)) {
      device_memory.emplace_back(s->size());
      s->bind(device_memory.back().data());
    }
    for (float& x : w_host) x = nd(rng);
  }
};

// One thread on both sides: the host path runs its blocks in a parallel region, where BLAS and
// LAPACK run on one thread, while the device path calls them from this thread alone, where they
// would run on all and round differently; with one thread the two paths call the same functions
// on the same data.
TEST_P(DeviceCodePath, GivesTheHostPathsBits) {
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  TwoPaths p(GetParam());
  auto& [device, t, on_host, on_device, device_memory, rng, nd, w_host] = p;
  std::vector<float> w_device = w_host, g(t.numel);
  for (int64_t step = 1; step <= 14; ++step) {
    for (float& x : g) x = nd(rng);
    if (step == 5) g[3] = std::numeric_limits<float>::quiet_NaN();   // skips the first block once
    on_host.step_layer(0, w_host.data(), g.data(), 0.7f, 0.01, step);
    on_device.step_layer(0, w_device.data(), g.data(), 0.7f, 0.01, step);
    ASSERT_EQ(std::memcmp(w_host.data(), w_device.data(), w_host.size() * sizeof(float)), 0) << "step " << step;
  }
  const std::vector<StateTensor*> a = on_host.layer_states(0), b = on_device.layer_states(0);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i)
    EXPECT_EQ(std::memcmp(a[i]->data(), b[i]->data(), a[i]->size() * sizeof(float)), 0) << a[i]->spec().name;
  const std::vector<OptimizerCounters> ca = on_host.counters(), cb = on_device.counters();
  ASSERT_EQ(ca.size(), cb.size());
  for (size_t i = 0; i < ca.size(); ++i) EXPECT_EQ(ca[i].values, cb[i].values) << ca[i].name;
  // The refreshes ran (the comparison covers installs, not only the per-step work), computed by
  // the backend's solvers (native mode's inline refresh on a device).
  EXPECT_GT(on_device.preconditioner(0, 0).refresh_count(), 2);
  EXPECT_GT(device.refreshes_computed, 0);
  omp_set_num_threads(threads);
}

// The default threads, as a run uses them: the two paths round their BLAS calls differently (a
// parallel region against the calling thread), so the weights agree within fp32 rounding grown
// over 14 steps and their refreshes, not bit for bit; on blocks whose factors have full rank
// (a_full_rank_layer says why).
TEST_P(DeviceCodePath, StaysWithinRoundingOfTheHostPathOnTheDefaultThreads) {
  SecondOrderParams params = params_for(GetParam());
  params.max_preconditioner_dim = 64;
  TwoPaths p(params, a_full_rank_layer());
  auto& [device, t, on_host, on_device, device_memory, rng, nd, w_host] = p;
  const std::vector<float> w0 = w_host;
  std::vector<float> w_device = w_host, g(t.numel);
  for (int64_t step = 1; step <= 14; ++step) {
    for (float& x : g) x = nd(rng);
    on_host.step_layer(0, w_host.data(), g.data(), 0.7f, 0.01, step);
    on_device.step_layer(0, w_device.data(), g.data(), 0.7f, 0.01, step);
  }
  double diff = 0, moved = 0;
  for (size_t i = 0; i < w_host.size(); ++i) {
    diff = std::max(diff, static_cast<double>(std::abs(w_host[i] - w_device[i])));
    moved = std::max(moved, static_cast<double>(std::abs(w_host[i] - w0[i])));
  }
  EXPECT_GT(moved, 0);
  EXPECT_LT(diff, 1e-3 * moved) << "largest difference " << diff << " of a largest update " << moved;
  EXPECT_GT(device.refreshes_computed, 0);
}

INSTANTIATE_TEST_SUITE_P(Optimizers, DeviceCodePath,
                         ::testing::Combine(::testing::Values("soap", "shampoo", "kl_shampoo"),
                                            ::testing::Values(matfn::Precision::Float64, matfn::Precision::Float32)),
                         [](const auto& info) {
                           return std::get<0>(info.param) + "_" + matfn::to_string(std::get<1>(info.param));
                         });

// step_matmul_flops (run_info.json's optimizer_step_matmul_flops, the benchmarks' FLOP rate of
// optim_s) against the products the blocks ask the backend for on a step without a refresh.
TEST_P(DeviceCodePath, AStepsProductsAreTheFlopsStepMatmulFlopsCounts) {
  SecondOrderParams params = params_for(GetParam());
  params.stagger = false;   // every block refreshes at the same steps: the others refresh none
  TwoPaths p(params);
  auto& [device, t, on_host, on_device, device_memory, rng, nd, w_host] = p;
  (void)on_host;
  ASSERT_EQ(on_device.num_layers(), 1);
  const double expected = on_device.step_matmul_flops();
  std::vector<float> g(t.numel);
  int clean_steps = 0;
  for (int64_t step = 1; step <= 14; ++step) {
    for (float& x : g) x = nd(rng);
    const int refreshes_before = device.refreshes_computed;
    const double before = device.matmul_flops;
    on_device.step_layer(0, w_host.data(), g.data(), 0.7f, 0.01, step);
    // Steps after the first refresh (Shampoo's roots exist) that refreshed nothing.
    if (step > 4 && device.refreshes_computed == refreshes_before) {
      EXPECT_EQ(device.matmul_flops - before, expected) << "step " << step;
      ++clean_steps;
    }
  }
  EXPECT_GT(clean_steps, 3);
}
