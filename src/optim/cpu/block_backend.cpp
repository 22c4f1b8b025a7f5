// The host's block backend (optim/block_backend.hpp): the CPU run's code. The loops are the
// optimizer's own (the same fp32 operations in the same order as before the seam), so that the
// CPU path computes the same bits.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "optim/block_backend.hpp"
#include "optim/block_math.hpp"
#include "optim/thread_scratch.hpp"
#include "optim/update_compensation.hpp"

namespace asteria {

namespace {

// Q = the eigenvectors of the d x d factor F, eigenvalues descending, computed in `precision`
// (fp32: straight from and into the fp32 state, retried in fp64 on failure); identity on failure.
matfn::Status initial_basis(int64_t d, const float* F, float* Q, matfn::Precision precision) {
  static thread_local matfn::Workspace ws;
  matfn::Status s = matfn::Status::LapackError;
  if (precision == matfn::Precision::Float32) s = matfn::eigenbasis_descending(static_cast<int>(d), F, Q, ws);
  if (s != matfn::Status::Ok) {
    static thread_local std::vector<double> a, q;
    a.resize(d * d);
    q.resize(d * d);
    blockmath::to_double(d * d, F, a.data());
    s = matfn::eigenbasis_descending(static_cast<int>(d), a.data(), q.data(), ws);
    if (s == matfn::Status::Ok) blockmath::to_float(d * d, q.data(), Q);
  }
  if (s != matfn::Status::Ok)
    for (int64_t i = 0; i < d * d; ++i) Q[i] = (i / d == i % d) ? 1.0f : 0.0f;
  return s;
}

// The host's scratch slots are the thread's (thread_scratch.hpp), every backend slot among them.
static_assert(kThreadScratchSlots == BlockBackend::kSlots);

class HostBlockBackend final : public BlockBackend {
 public:
  bool on_device() const override { return false; }
  float* scratch(int slot, size_t count) const override { return thread_scratch(slot, count); }

  void to_host(float* host, const float* x, size_t n) const override {
    if (n) std::memcpy(host, x, n * sizeof(float));
  }
  void from_host(float* x, const float* host, size_t n) const override {
    if (n) std::memcpy(x, host, n * sizeof(float));
  }
  void to_host_double(const float* x, size_t n, double* host) const override {
    blockmath::to_double(static_cast<int64_t>(n), x, host);
  }
  void from_host_double(float* x, const double* host, size_t n) const override {
    blockmath::to_float(static_cast<int64_t>(n), host, x);
  }

  void copy(float* dst, const float* src, size_t n) const override { std::copy(src, src + n, dst); }

  bool scaled_copy_finite(const float* src, int64_t ld, int64_t rows, int64_t cols, float scale,
                          float* dst) const override {
    bool finite = true;
    for (int64_t i = 0; i < rows; ++i) {
      const float* s = src + i * ld;
      float* d = dst + i * cols;
      for (int64_t j = 0; j < cols; ++j) {
        d[j] = s[j] * scale;
        finite &= std::isfinite(d[j]);
      }
    }
    return finite;
  }
  void scale(float* x, size_t n, float s) const override {
    for (size_t i = 0; i < n; ++i) x[i] *= s;
  }

  void mul(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* A, const float* B, float beta,
           float* C) const override {
    blockmath::mul(ta, tb, m, n, k, alpha, A, B, beta, C);
  }
  void ema(float* x, const float* y, size_t n, float b, float a) const override {
    for (size_t i = 0; i < n; ++i) x[i] = b * x[i] + a * y[i];
  }
  void shampoo_moments(float* M, float* V, const float* G, int64_t mn, float b1, float b2, float m_add,
                       float v_add) const override {
    for (int64_t i = 0; i < mn; ++i) {
      M[i] = b1 * M[i] + m_add * G[i];
      V[i] = b2 * V[i] + v_add * G[i] * G[i];
    }
  }
  double adam_direction(const float* M, const float* V, int64_t mn, float inv_bc1, float inv_bc2, float eps, bool graft,
                        float* A) const override {
    double sq = 0;
    for (int64_t i = 0; i < mn; ++i) {
      const float mh = M[i] * inv_bc1;
      A[i] = graft ? mh / (std::sqrt(V[i] * inv_bc2) + eps) : mh;
      sq += static_cast<double>(A[i]) * A[i];
    }
    return sq;
  }
  double sum_of_squares(const float* x, int64_t n) const override {
    double sq = 0;
    for (int64_t i = 0; i < n; ++i) sq += static_cast<double>(x[i]) * x[i];
    return sq;
  }
  void kl_damp(float* P, const float* dL, const float* dR, int64_t m, int64_t n, float damping) const override {
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        const float s = dL[i] * dR[j];
        P[i * n + j] *= s / (1.0f + s * damping);
      }
  }
  void kl_factor_diagonals(const float* H, const float* dL, const float* dR, int64_t m, int64_t n, double* ldiag,
                           double* rdiag) const override {
    std::fill(ldiag, ldiag + m, 0.0);
    std::fill(rdiag, rdiag + n, 0.0);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        const double h = H[i * n + j];
        ldiag[i] += (h * dR[j]) * (h * dR[j]);
        rdiag[j] += (h * dL[i]) * (h * dL[i]);
      }
  }
  void scale_columns(float* X, const float* s, int64_t m, int64_t n) const override {
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) X[i * n + j] *= s[j];
  }
  void scale_rows(float* X, const float* s, int64_t m, int64_t n) const override {
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) X[i * n + j] *= s[i];
  }

  void accumulate_left(const float* G, int64_t m, int64_t n, float beta, float scale, float* L) const override {
    blockmath::accumulate_left(G, m, n, beta, scale, L);
  }
  void accumulate_right(const float* G, int64_t m, int64_t n, float beta, float scale, float* R) const override {
    blockmath::accumulate_right(G, m, n, beta, scale, R);
  }
  void to_basis(const float* QL, const float* X, const float* QR, int64_t m, int64_t n, float* tmp,
                float* out) const override {
    blockmath::to_basis(QL, X, QR, m, n, tmp, out);
  }
  void from_basis(const float* QL, const float* X, const float* QR, int64_t m, int64_t n, float* tmp,
                  float* out) const override {
    blockmath::from_basis(QL, X, QR, m, n, tmp, out);
  }
  void soap_moments(float* M, float* V, float* G, int64_t mn, float b1, float b2, float a1, float a2,
                    float eps) const override {
    blockmath::soap_moments(M, V, G, mn, b1, b2, a1, a2, eps);
  }
  matfn::Status initial_eigenbasis(int64_t d, const float* F, float* Q, matfn::Precision precision) const override {
    return initial_basis(d, F, Q, precision);
  }
  void permute(const float* X, const std::vector<int>& row_perm, const std::vector<int>& col_perm, int64_t m,
               int64_t n, float* out) const override {
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) out[i * n + j] = X[row_perm[i] * n + col_perm[j]];
  }

  void apply_update(float* w0, float* c0, int64_t ld, const float* D, int64_t rows, int64_t cols, float lr,
                    float lr_wd, bool decay_first) const override {
    for (int64_t i = 0; i < rows; ++i) {
      float* w = w0 + i * ld;
      float* c = c0 ? c0 + i * ld : nullptr;
      const float* d = D + i * cols;
      if (decay_first && c) {
        for (int64_t j = 0; j < cols; ++j) compensated_add(w[j], c[j], -(lr * d[j] + lr_wd * w[j]));
      } else if (decay_first) {
        for (int64_t j = 0; j < cols; ++j) w[j] -= lr * d[j] + lr_wd * w[j];
      } else if (c) {
        for (int64_t j = 0; j < cols; ++j) {
          compensated_add(w[j], c[j], -lr * d[j]);
          compensated_add(w[j], c[j], -lr_wd * w[j]);
        }
      } else {
        for (int64_t j = 0; j < cols; ++j) {
          const float stepped = w[j] - lr * d[j];
          w[j] = stepped - lr_wd * stepped;
        }
      }
    }
  }
  void adamw_update(float* w, float* c, float* m, float* v, const float* g, float grad_scale, size_t n,
                    const AdamWCoefficients& k) const override {
    asteria::adamw_update(w, c, m, v, g, grad_scale, n, k);
  }
};

}  // namespace

const BlockBackend& host_block_backend() {
  static const HostBlockBackend backend;
  return backend;
}

}  // namespace asteria
