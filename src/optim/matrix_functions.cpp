#include "optim/matrix_functions.hpp"

#include <cblas.h>
#include <lapacke.h>

#include <algorithm>
#include <cmath>
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

void Workspace::reserve(int n) {
  const size_t nn = static_cast<size_t>(n) * n;
  for (auto* v : {&a, &b, &c, &d})
    if (v->size() < nn) v->resize(nn);
  if (w.size() < static_cast<size_t>(n)) w.resize(n);
}

bool all_finite(int64_t count, const double* x) {
  for (int64_t i = 0; i < count; ++i)
    if (!std::isfinite(x[i])) return false;
  return true;
}

namespace {

void gemm(int n, bool ta, bool tb, double alpha, const double* A, const double* B, double beta, double* C) {
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, n, n, n,
              alpha, A, n, B, n, beta, C, n);
}

}  // namespace

Status eigh(int n, const double* A, double* w, double* V, Workspace& ws) {
  const int64_t nn = static_cast<int64_t>(n) * n;
  if (!all_finite(nn, A)) return Status::NonFinite;
  std::copy(A, A + nn, V);
  lapack_int info = LAPACKE_dsyevd(LAPACK_ROW_MAJOR, 'V', 'U', n, V, n, w);
  if (info != 0) return Status::LapackError;
  if (!all_finite(n, w)) return Status::NonFinite;
  return Status::Ok;
}

Status inverse_root_eigh(int n, const double* A, double p, double eps, double* out, Workspace& ws) {
  ws.reserve(n);
  double* V = ws.a.data();
  double* W = ws.b.data();
  double* w = ws.w.data();
  Status s = eigh(n, A, w, V, ws);
  if (s != Status::Ok) return s;
  // out = V diag(mu^(-1/p)) V^T, computed as (V diag(mu^(-1/2p))) (V diag(mu^(-1/2p)))^T.
  for (int j = 0; j < n; ++j) {
    double mu = w[j] + eps;
    if (eps > 0) mu = std::max(mu, eps);
    else if (!(mu > 0)) return Status::NotPositive;
    w[j] = std::pow(mu, -0.5 / p);
  }
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j) W[i * n + j] = V[i * n + j] * w[j];
  gemm(n, false, true, 1.0, W, W, 0.0, out);
  return all_finite(static_cast<int64_t>(n) * n, out) ? Status::Ok : Status::NonFinite;
}

Status inverse_root_newton(int n, const double* A, int p, double eps, double* out, Workspace& ws,
                           int max_iters, double tol) {
  ws.reserve(n);
  const int64_t nn = static_cast<int64_t>(n) * n;
  if (!all_finite(nn, A)) return Status::NonFinite;
  double* M = ws.a.data();
  double* T = ws.b.data();
  double* tmp = ws.c.data();
  double* Tp = ws.d.data();
  std::copy(A, A + nn, M);
  for (int i = 0; i < n; ++i) M[i * n + i] += eps;
  double norm = 0;
  for (int64_t i = 0; i < nn; ++i) norm += M[i] * M[i];
  norm = std::sqrt(norm);
  if (!(norm > 0)) return Status::NotPositive;
  const double z = (p + 1.0) / (2.0 * norm);
  for (int64_t i = 0; i < nn; ++i) M[i] *= z;
  std::fill(out, out + nn, 0.0);
  const double x0 = std::pow(z, 1.0 / p);
  for (int i = 0; i < n; ++i) out[i * n + i] = x0;
  for (int it = 0; it < max_iters; ++it) {
    double err = 0;
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < n; ++j) err = std::max(err, std::abs(M[i * n + j] - (i == j ? 1.0 : 0.0)));
    if (!std::isfinite(err)) return Status::NonFinite;
    if (err <= tol) return Status::Ok;
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < n; ++j) T[i * n + j] = ((i == j ? p + 1.0 : 0.0) - M[i * n + j]) / p;
    gemm(n, false, false, 1.0, out, T, 0.0, tmp);  // X <- X T
    std::copy(tmp, tmp + nn, out);
    std::copy(T, T + nn, Tp);                      // Tp = T^p
    for (int k = 1; k < p; ++k) {
      gemm(n, false, false, 1.0, Tp, T, 0.0, tmp);
      std::copy(tmp, tmp + nn, Tp);
    }
    gemm(n, false, false, 1.0, Tp, M, 0.0, tmp);   // M <- T^p M
    std::copy(tmp, tmp + nn, M);
  }
  return Status::NotConverged;
}

Status eigenbasis_descending(int n, const double* L, double* Q, Workspace& ws) {
  ws.reserve(n);
  double* V = ws.a.data();
  Status s = eigh(n, L, ws.w.data(), V, ws);
  if (s != Status::Ok) return s;
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j) Q[i * n + j] = V[i * n + (n - 1 - j)];
  return Status::Ok;
}

Status qr_refresh(int n, const double* L, double* Q, std::vector<int>& perm, Workspace& ws, bool sort) {
  ws.reserve(n);
  const int64_t nn = static_cast<int64_t>(n) * n;
  if (!all_finite(nn, L) || !all_finite(nn, Q)) return Status::NonFinite;
  double* LQ = ws.a.data();
  double* Qs = ws.b.data();
  double* w = ws.w.data();
  gemm(n, false, false, 1.0, L, Q, 0.0, LQ);
  // d_j = q_j^T L q_j.
  for (int j = 0; j < n; ++j) {
    double s = 0;
    for (int i = 0; i < n; ++i) s += Q[i * n + j] * LQ[i * n + j];
    w[j] = s;
  }
  perm.resize(n);
  std::iota(perm.begin(), perm.end(), 0);
  if (sort) std::stable_sort(perm.begin(), perm.end(), [&](int a, int b) { return w[a] > w[b]; });
  // Power step on the re-sorted basis: L Q[:, perm] = (L Q)[:, perm].
  for (int i = 0; i < n; ++i)
    for (int k = 0; k < n; ++k) Qs[i * n + k] = LQ[i * n + perm[k]];
  std::vector<double>& tau = ws.c;  // n entries used
  lapack_int info = LAPACKE_dgeqrf(LAPACK_ROW_MAJOR, n, n, Qs, n, tau.data());
  if (info != 0) return Status::LapackError;
  info = LAPACKE_dorgqr(LAPACK_ROW_MAJOR, n, n, n, Qs, n, tau.data());
  if (info != 0) return Status::LapackError;
  if (!all_finite(nn, Qs)) return Status::NonFinite;
  std::copy(Qs, Qs + nn, Q);
  return Status::Ok;
}

}  // namespace asteria::matfn
