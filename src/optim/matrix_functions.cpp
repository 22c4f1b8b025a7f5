#include "optim/matrix_functions.hpp"

#include <cblas.h>
#include <lapacke.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <numeric>

namespace asteria::matfn {

const char* to_string(Status s) {
  switch (s) {
    case Status::Ok: return "ok";
    case Status::NonFinite: return "non-finite input";
    case Status::NotConverged: return "did not converge";
    case Status::NotPositive: return "matrix not positive definite";
    case Status::LapackError: return "LAPACK error";
  }
  return "?";
}

template <class Real>
void Scratch<Real>::reserve(int n) {
  const size_t nn = static_cast<size_t>(n) * n;
  for (auto* v : {&a, &b, &c, &d})
    if (v->size() < nn) v->resize(nn);
  if (w.size() < static_cast<size_t>(n)) w.resize(n);
}

template <class Real>
bool all_finite(int64_t count, const Real* x) {
  for (int64_t i = 0; i < count; ++i)
    if (!std::isfinite(x[i])) return false;
  return true;
}

namespace {

// The BLAS / LAPACK routine of each precision.
void gemm(int n, bool ta, bool tb, double alpha, const double* A, const double* B, double beta, double* C) {
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, n, n, n,
              alpha, A, n, B, n, beta, C, n);
}
void gemm(int n, bool ta, bool tb, float alpha, const float* A, const float* B, float beta, float* C) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, n, n, n,
              alpha, A, n, B, n, beta, C, n);
}
lapack_int syevd(int n, double* V, double* w) { return LAPACKE_dsyevd(LAPACK_ROW_MAJOR, 'V', 'U', n, V, n, w); }
lapack_int syevd(int n, float* V, float* w) { return LAPACKE_ssyevd(LAPACK_ROW_MAJOR, 'V', 'U', n, V, n, w); }
lapack_int geqrf(int n, double* A, double* tau) { return LAPACKE_dgeqrf(LAPACK_ROW_MAJOR, n, n, A, n, tau); }
lapack_int geqrf(int n, float* A, float* tau) { return LAPACKE_sgeqrf(LAPACK_ROW_MAJOR, n, n, A, n, tau); }
lapack_int orgqr(int n, double* A, const double* tau) { return LAPACKE_dorgqr(LAPACK_ROW_MAJOR, n, n, n, A, n, tau); }
lapack_int orgqr(int n, float* A, const float* tau) { return LAPACKE_sorgqr(LAPACK_ROW_MAJOR, n, n, n, A, n, tau); }

std::atomic<int> injected_eigh_failures{0};

}  // namespace

void inject_eigh_failures(int count) { injected_eigh_failures = count; }

template <class Real>
Status eigh(int n, const Real* A, Real* w, Real* V, Workspace& ws) {
  const int64_t nn = static_cast<int64_t>(n) * n;
  if (injected_eigh_failures.load() > 0 && injected_eigh_failures.fetch_sub(1) > 0) return Status::LapackError;
  if (!all_finite(nn, A)) return Status::NonFinite;
  std::copy(A, A + nn, V);
  lapack_int info = syevd(n, V, w);
  if (info != 0) return Status::LapackError;
  if (!all_finite(n, w)) return Status::NonFinite;
  return Status::Ok;
}

template <class Real>
Status inverse_root_eigh(int n, const Real* A, double p, double eps, Real* out, Workspace& ws) {
  Scratch<Real>& s = ws.get<Real>();
  s.reserve(n);
  Real* V = s.a.data();
  Real* W = s.b.data();
  Real* w = s.w.data();
  Status st = eigh(n, A, w, V, ws);
  if (st != Status::Ok) return st;
  // out = V diag(mu^(-1/p)) V^T, computed as (V diag(mu^(-1/2p))) (V diag(mu^(-1/2p)))^T.
  // Without eps, an eigenvalue within roundoff of zero (relative to the largest) means a
  // singular matrix, whatever its computed sign.
  Real wmax = 0;
  for (int j = 0; j < n; ++j) wmax = std::max(wmax, std::abs(w[j]));
  const Real singular = wmax * n * std::numeric_limits<Real>::epsilon();
  for (int j = 0; j < n; ++j) {
    double mu = w[j] + eps;
    if (eps > 0) mu = std::max(mu, eps);
    else if (!(mu > singular)) return Status::NotPositive;
    w[j] = static_cast<Real>(std::pow(mu, -0.5 / p));
  }
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j) W[i * n + j] = V[i * n + j] * w[j];
  gemm(n, false, true, Real(1), W, W, Real(0), out);
  return all_finite(static_cast<int64_t>(n) * n, out) ? Status::Ok : Status::NonFinite;
}

template <class Real>
Status inverse_root_newton(int n, const Real* A, int p, double eps, Real* out, Workspace& ws,
                           int max_iters, double tol) {
  Scratch<Real>& s = ws.get<Real>();
  s.reserve(n);
  const int64_t nn = static_cast<int64_t>(n) * n;
  if (!all_finite(nn, A)) return Status::NonFinite;
  Real* M = s.a.data();
  Real* T = s.b.data();
  Real* tmp = s.c.data();
  Real* Tp = s.d.data();
  std::copy(A, A + nn, M);
  for (int i = 0; i < n; ++i) M[i * n + i] += eps;
  double norm = 0;
  for (int64_t i = 0; i < nn; ++i) norm += static_cast<double>(M[i]) * M[i];
  norm = std::sqrt(norm);
  if (!(norm > 0)) return Status::NotPositive;
  const double z = (p + 1.0) / (2.0 * norm);
  for (int64_t i = 0; i < nn; ++i) M[i] *= z;
  std::fill(out, out + nn, Real(0));
  const double x0 = std::pow(z, 1.0 / p);
  for (int i = 0; i < n; ++i) out[i * n + i] = static_cast<Real>(x0);
  for (int it = 0; it < max_iters; ++it) {
    double err = 0;
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < n; ++j) err = std::max(err, std::abs(M[i * n + j] - (i == j ? 1.0 : 0.0)));
    if (!std::isfinite(err)) return Status::NonFinite;
    if (err <= tol) return Status::Ok;
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < n; ++j) T[i * n + j] = static_cast<Real>(((i == j ? p + 1.0 : 0.0) - M[i * n + j]) / p);
    gemm(n, false, false, Real(1), out, T, Real(0), tmp);  // X <- X T
    std::copy(tmp, tmp + nn, out);
    std::copy(T, T + nn, Tp);                              // Tp = T^p
    for (int k = 1; k < p; ++k) {
      gemm(n, false, false, Real(1), Tp, T, Real(0), tmp);
      std::copy(tmp, tmp + nn, Tp);
    }
    gemm(n, false, false, Real(1), Tp, M, Real(0), tmp);   // M <- T^p M
    std::copy(tmp, tmp + nn, M);
  }
  return Status::NotConverged;
}

template <class Real>
Status eigenbasis_descending(int n, const Real* L, Real* Q, Workspace& ws) {
  Scratch<Real>& s = ws.get<Real>();
  s.reserve(n);
  Real* V = s.a.data();
  Status st = eigh(n, L, s.w.data(), V, ws);
  if (st != Status::Ok) return st;
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j) Q[i * n + j] = V[i * n + (n - 1 - j)];
  return Status::Ok;
}

template <class Real>
Status qr_refresh(int n, const Real* L, Real* Q, std::vector<int>& perm, Workspace& ws, bool sort) {
  Scratch<Real>& s = ws.get<Real>();
  s.reserve(n);
  const int64_t nn = static_cast<int64_t>(n) * n;
  if (!all_finite(nn, L) || !all_finite(nn, Q)) return Status::NonFinite;
  Real* LQ = s.a.data();
  Real* Qs = s.b.data();
  Real* w = s.w.data();
  gemm(n, false, false, Real(1), L, Q, Real(0), LQ);
  // d_j = q_j^T L q_j, accumulated in fp64, row by row (contiguous; same order of the sum).
  if (ws.sums.size() < static_cast<size_t>(n)) ws.sums.resize(n);
  double* d = ws.sums.data();
  std::fill(d, d + n, 0.0);
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j) d[j] += static_cast<double>(Q[i * n + j]) * LQ[i * n + j];
  for (int j = 0; j < n; ++j) w[j] = static_cast<Real>(d[j]);
  perm.resize(n);
  std::iota(perm.begin(), perm.end(), 0);
  if (sort) std::stable_sort(perm.begin(), perm.end(), [&](int a, int b) { return w[a] > w[b]; });
  // Power step on the re-sorted basis: L Q[:, perm] = (L Q)[:, perm].
  for (int i = 0; i < n; ++i)
    for (int k = 0; k < n; ++k) Qs[i * n + k] = LQ[i * n + perm[k]];
  Real* tau = s.c.data();  // n entries used
  lapack_int info = geqrf(n, Qs, tau);
  if (info != 0) return Status::LapackError;
  info = orgqr(n, Qs, tau);
  if (info != 0) return Status::LapackError;
  if (!all_finite(nn, Qs)) return Status::NonFinite;
  std::copy(Qs, Qs + nn, Q);
  return Status::Ok;
}

#define ASTERIA_MATFN_INSTANTIATE(Real)                                                                   \
  template struct Scratch<Real>;                                                                          \
  template bool all_finite<Real>(int64_t, const Real*);                                                   \
  template Status eigh<Real>(int, const Real*, Real*, Real*, Workspace&);                                 \
  template Status inverse_root_eigh<Real>(int, const Real*, double, double, Real*, Workspace&);           \
  template Status inverse_root_newton<Real>(int, const Real*, int, double, Real*, Workspace&, int, double); \
  template Status eigenbasis_descending<Real>(int, const Real*, Real*, Workspace&);                       \
  template Status qr_refresh<Real>(int, const Real*, Real*, std::vector<int>&, Workspace&, bool);
ASTERIA_MATFN_INSTANTIATE(double)
ASTERIA_MATFN_INSTANTIATE(float)
#undef ASTERIA_MATFN_INSTANTIATE

// The Precision overloads: fp64 data through fp32 staging buffers.
namespace {

float* staging(std::vector<float>& v, int64_t count) {
  if (v.size() < static_cast<size_t>(count)) v.resize(count);
  return v.data();
}
void narrow(int64_t count, const double* x, float* y) {
  for (int64_t i = 0; i < count; ++i) y[i] = static_cast<float>(x[i]);
}
void widen(int64_t count, const float* x, double* y) {
  for (int64_t i = 0; i < count; ++i) y[i] = x[i];
}

}  // namespace

// A square function of one fp64 matrix, computed in fp32 (A rounded into ws, the result widened
// into out) or, when that fails, in fp64 from A itself.
template <class Fp32, class Fp64>
Status fp32_or_fp64(int n, const double* A, double* out, Workspace& ws, Fp32 fp32, Fp64 fp64) {
  const int64_t nn = static_cast<int64_t>(n) * n;
  float* a = staging(ws.in, nn);
  float* o = staging(ws.out, nn);
  narrow(nn, A, a);
  if (fp32(a, o) != Status::Ok) return fp64();
  widen(nn, o, out);
  return Status::Ok;
}

Status inverse_root_eigh(Precision precision, int n, const double* A, double p, double eps, double* out,
                         Workspace& ws) {
  auto fp64 = [&] { return inverse_root_eigh<double>(n, A, p, eps, out, ws); };
  if (precision == Precision::Float64) return fp64();
  return fp32_or_fp64(n, A, out, ws, [&](const float* a, float* o) { return inverse_root_eigh<float>(n, a, p, eps, o, ws); },
                      fp64);
}

Status inverse_root_newton(Precision precision, int n, const double* A, int p, double eps, double* out,
                           Workspace& ws) {
  auto fp64 = [&] { return inverse_root_newton<double>(n, A, p, eps, out, ws); };
  if (precision == Precision::Float64) return fp64();
  return fp32_or_fp64(n, A, out, ws, [&](const float* a, float* o) { return inverse_root_newton<float>(n, a, p, eps, o, ws); },
                      fp64);
}

Status qr_refresh(Precision precision, int n, const double* L, double* Q, std::vector<int>& perm,
                  Workspace& ws, bool sort) {
  auto fp64 = [&] { return qr_refresh<double>(n, L, Q, perm, ws, sort); };
  if (precision == Precision::Float64) return fp64();
  // Q is input and output: its fp32 copy is the fp32 call's output buffer.
  return fp32_or_fp64(n, L, Q, ws,
                      [&](const float* l, float* q) {
                        narrow(static_cast<int64_t>(n) * n, Q, q);
                        return qr_refresh<float>(n, l, q, perm, ws, sort);
                      },
                      fp64);
}

}  // namespace asteria::matfn
