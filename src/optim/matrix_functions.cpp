#include "optim/matrix_functions.hpp"

#include <cblas.h>
#include <lapacke.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <numeric>

#include "core/error.hpp"

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
// LAPACK's column-major drivers with the caller's work arrays. LAPACKE's high-level row-major
// drivers allocate a transposed copy and their work arrays on every call: fresh memory, which is
// slow to touch (about 15 us a 4 KiB page on this project's VMs) and was most of a SOAP step's
// page faults. Here the transposes go through the scratch and the work arrays grow once; the
// routine, its inputs and its work sizes (the optimal ones LAPACK reports, as LAPACKE asks for)
// are the same, so are the results, bit for bit.
lapack_int syevd_work(lapack_int n, double* a, double* w, double* work, lapack_int lwork, lapack_int* iwork,
                      lapack_int liwork) {
  return LAPACKE_dsyevd_work(LAPACK_COL_MAJOR, 'V', 'U', n, a, n, w, work, lwork, iwork, liwork);
}
lapack_int syevd_work(lapack_int n, float* a, float* w, float* work, lapack_int lwork, lapack_int* iwork,
                      lapack_int liwork) {
  return LAPACKE_ssyevd_work(LAPACK_COL_MAJOR, 'V', 'U', n, a, n, w, work, lwork, iwork, liwork);
}
lapack_int geqrf_work(lapack_int n, double* a, lapack_int lda, double* tau, double* work, lapack_int lwork) {
  return LAPACKE_dgeqrf_work(LAPACK_COL_MAJOR, n, n, a, lda, tau, work, lwork);
}
lapack_int geqrf_work(lapack_int n, float* a, lapack_int lda, float* tau, float* work, lapack_int lwork) {
  return LAPACKE_sgeqrf_work(LAPACK_COL_MAJOR, n, n, a, lda, tau, work, lwork);
}
lapack_int orgqr_work(lapack_int n, double* a, lapack_int lda, const double* tau, double* work, lapack_int lwork) {
  return LAPACKE_dorgqr_work(LAPACK_COL_MAJOR, n, n, n, a, lda, tau, work, lwork);
}
lapack_int orgqr_work(lapack_int n, float* a, lapack_int lda, const float* tau, float* work, lapack_int lwork) {
  return LAPACKE_sorgqr_work(LAPACK_COL_MAJOR, n, n, n, a, lda, tau, work, lwork);
}

static_assert(std::is_same_v<lapack_int, int>, "Scratch::lapack_iwork holds lapack_int as int (LP64 LAPACK)");

// v's first `count` elements, v grown to hold them if it must (reused from call to call).
template <class T>
T* grown(std::vector<T>& v, size_t count) {
  if (v.size() < count) v.resize(count);
  return v.data();
}
// to = from^T, n x n, in tiles: a row of `to` per column of `from` would stride both by n, a
// power of two at most block sizes, and evict its own lines.
template <class Real>
void transpose(int n, const Real* from, Real* to) {
  constexpr int kTile = 32;
  for (int i0 = 0; i0 < n; i0 += kTile)
    for (int j0 = 0; j0 < n; j0 += kTile)
      for (int j = j0; j < std::min(n, j0 + kTile); ++j)
        for (int i = i0; i < std::min(n, i0 + kTile); ++i)
          to[static_cast<int64_t>(j) * n + i] = from[static_cast<int64_t>(i) * n + j];
}
// A LAPACK work size as reported by a query (a floating-point count).
template <class Real>
lapack_int work_size(Real reported) {
  return std::max<lapack_int>(1, static_cast<lapack_int>(reported));
}

// The row-major n x n matrix A (in place) through a column-major LAPACK call on the scratch's
// transposed copy: call(column-major copy) -> info.
template <class Real, class Call>
lapack_int on_column_major(int n, Real* A, Scratch<Real>& s, Call&& call) {
  Real* a = grown(s.lapack_a, static_cast<size_t>(n) * n);
  transpose(n, A, a);
  const lapack_int info = call(a);
  if (info == 0) transpose(n, a, A);
  return info;
}

template <class Real>
lapack_int syevd(int n, Real* V, Real* w, Scratch<Real>& s) {
  return on_column_major(n, V, s, [&](Real* a) {
    Real lwork = 0;
    lapack_int liwork = 0;
    lapack_int info = syevd_work(n, a, w, &lwork, -1, &liwork, -1);
    if (info != 0) return info;
    return syevd_work(n, a, w, grown(s.lapack_work, work_size(lwork)), work_size(lwork),
                      grown(s.lapack_iwork, std::max<lapack_int>(1, liwork)), std::max<lapack_int>(1, liwork));
  });
}
// geqrf and orgqr in place on a column-major n x n matrix with leading dimension lda.
template <class Real>
lapack_int geqrf(int n, Real* a, int lda, Real* tau, Scratch<Real>& s) {
  Real lwork = 0;
  lapack_int info = geqrf_work(n, a, lda, tau, &lwork, -1);
  if (info != 0) return info;
  return geqrf_work(n, a, lda, tau, grown(s.lapack_work, work_size(lwork)), work_size(lwork));
}
template <class Real>
lapack_int orgqr(int n, Real* a, int lda, const Real* tau, Scratch<Real>& s) {
  Real lwork = 0;
  lapack_int info = orgqr_work(n, a, lda, tau, &lwork, -1);
  if (info != 0) return info;
  return orgqr_work(n, a, lda, tau, grown(s.lapack_work, work_size(lwork)), work_size(lwork));
}

std::atomic<int> injected_eigh_failures{0};

}  // namespace

void inject_eigh_failures(int count) { injected_eigh_failures = count; }

template <class Real>
Status eigh(int n, const Real* A, Real* w, Real* V, Workspace& ws) {
  const int64_t nn = static_cast<int64_t>(n) * n;
  if (injected_eigh_failures.load() > 0 && injected_eigh_failures.fetch_sub(1) > 0) return Status::LapackError;
  if (!all_finite(nn, A)) return Status::NonFinite;
  std::copy(A, A + nn, V);
  lapack_int info = syevd(n, V, w, ws.get<Real>());
  if (info != 0) return Status::LapackError;
  if (!all_finite(n, w)) return Status::NonFinite;
  return Status::Ok;
}

namespace {

// out = V diag(mu^(-1/p)) V^T from A's eigendecomposition (V, w; w is overwritten), computed as
// (V diag(mu^(-1/2p))) (V diag(mu^(-1/2p)))^T in the scratch W. Without eps, an eigenvalue
// within roundoff of zero (relative to the largest) means a singular matrix, whatever its
// computed sign.
template <class Real>
Status root_from_eigen(int n, const Real* V, Real* w, double p, double eps, Real* out, Real* W) {
  if (const Status st = inverse_root_scales(n, w, p, eps); st != Status::Ok) return st;
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j) W[i * n + j] = V[i * n + j] * w[j];
  gemm(n, false, true, Real(1), W, W, Real(0), out);
  return all_finite(static_cast<int64_t>(n) * n, out) ? Status::Ok : Status::NonFinite;
}

}  // namespace

template <class Real>
Status inverse_root_scales(int n, Real* w, double p, double eps) {
  Real wmax = 0;
  for (int j = 0; j < n; ++j) wmax = std::max(wmax, std::abs(w[j]));
  const Real singular = wmax * n * std::numeric_limits<Real>::epsilon();
  for (int j = 0; j < n; ++j) {
    double mu = w[j] + eps;
    if (eps > 0) mu = std::max(mu, eps);
    else if (!(mu > singular)) return Status::NotPositive;
    w[j] = static_cast<Real>(std::pow(mu, -0.5 / p));
  }
  return Status::Ok;
}

template <class Real>
Status inverse_root_eigh(int n, const Real* A, double p, double eps, Real* out, Workspace& ws) {
  Scratch<Real>& s = ws.get<Real>();
  s.reserve(n);
  Status st = eigh(n, A, s.w.data(), s.a.data(), ws);
  if (st != Status::Ok) return st;
  return root_from_eigen(n, s.a.data(), s.w.data(), p, eps, out, s.b.data());
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

namespace {

// qr_refresh's three parts work on Qs, the power step's n x n result, column-major with the
// leading dimension qr_ld(n) (n + 8: a 64-byte pad): LAPACK's QR is column-major, and a column
// stride of a large power of two maps a panel's rows onto the same cache sets (sgeqrf and sorgqr
// at n = 1024 take 26 ms with lda 1024 and 18 ms with 1032, one thread, this project's AMD VMs;
// at n = 768, 9.3 and 7.9 ms). Writing Qs column-major in the power step, and reading it back
// row-major once at the end, also drops the four transposes of a row-major caller's LAPACK calls.
int qr_ld(int n) { return n + 8; }

// power: Qs = (L Q)[:, perm], perm from the estimates diag(Q^T L Q).
template <class Real>
Status qr_power(int n, const Real* L, const Real* Q, std::vector<int>& perm, Real* Qs, Workspace& ws, bool sort) {
  Scratch<Real>& s = ws.get<Real>();
  s.reserve(n);
  const int64_t nn = static_cast<int64_t>(n) * n, ld = qr_ld(n);
  if (!all_finite(nn, L) || !all_finite(nn, Q)) return Status::NonFinite;
  // (L Q)^T = Q^T L^T, row-major: row j is column j of L Q, which goes whole into Qs.
  Real* LQt = s.a.data();
  Real* w = s.w.data();
  gemm(n, true, true, Real(1), Q, L, Real(0), LQt);
  // d_j = q_j^T L q_j = sum_i Q[i][j] (L Q)[i][j], accumulated in fp64 over i in order, for a
  // tile of columns j at a time (Q's rows contiguous, a stream per row of LQt).
  if (ws.sums.size() < static_cast<size_t>(n)) ws.sums.resize(n);
  double* d = ws.sums.data();
  std::fill(d, d + n, 0.0);
  constexpr int kTile = 16;
  for (int j0 = 0; j0 < n; j0 += kTile) {
    const int j1 = std::min(n, j0 + kTile);
    for (int64_t i = 0; i < n; ++i)
      for (int j = j0; j < j1; ++j) d[j] += static_cast<double>(Q[i * n + j]) * LQt[j * n + i];
  }
  for (int j = 0; j < n; ++j) w[j] = static_cast<Real>(d[j]);
  perm.resize(n);
  std::iota(perm.begin(), perm.end(), 0);
  if (sort) std::stable_sort(perm.begin(), perm.end(), [&](int a, int b) { return w[a] > w[b]; });
  // Power step on the re-sorted basis: L Q[:, perm] = (L Q)[:, perm].
  for (int k = 0; k < n; ++k) {
    const Real* column = LQt + static_cast<int64_t>(perm[k]) * n;
    std::copy(column, column + n, Qs + k * ld);
  }
  return Status::Ok;
}

// factor: Qs <- its QR factors (geqrf), tau: n entries.
template <class Real>
Status qr_factor(int n, Real* Qs, Real* tau, Workspace& ws) {
  return geqrf(n, Qs, qr_ld(n), tau, ws.get<Real>()) == 0 ? Status::Ok : Status::LapackError;
}

// form: Qs <- Q of the QR factors (orgqr).
template <class Real>
Status qr_form(int n, Real* Qs, const Real* tau, Workspace& ws) {
  const int ld = qr_ld(n);
  if (orgqr(n, Qs, ld, tau, ws.get<Real>()) != 0) return Status::LapackError;
  for (int64_t k = 0; k < n; ++k)
    if (!all_finite(n, Qs + k * ld)) return Status::NonFinite;
  return Status::Ok;
}

// Q (row-major, n x n) = Qs (column-major, leading dimension qr_ld(n)), in tiles, converted to Q's
// type (qr_refresh's result: fp32 widened to the fp64 output).
template <class From, class To>
void qr_result(int n, const From* Qs, To* Q) {
  constexpr int kTile = 32;
  const int64_t ld = qr_ld(n);
  for (int i0 = 0; i0 < n; i0 += kTile)
    for (int k0 = 0; k0 < n; k0 += kTile)
      for (int64_t i = i0; i < std::min(n, i0 + kTile); ++i)
        for (int64_t k = k0; k < std::min(n, k0 + kTile); ++k) Q[i * n + k] = static_cast<To>(Qs[k * ld + i]);
}

}  // namespace

template <class Real>
Status qr_refresh(int n, const Real* L, Real* Q, std::vector<int>& perm, Workspace& ws, bool sort) {
  Scratch<Real>& s = ws.get<Real>();
  s.reserve(n);
  Real* Qs = grown(s.b, static_cast<size_t>(n) * qr_ld(n));
  Real* tau = s.c.data();  // n entries used
  Status st = qr_power(n, L, Q, perm, Qs, ws, sort);
  if (st == Status::Ok) st = qr_factor(n, Qs, tau, ws);
  if (st == Status::Ok) st = qr_form(n, Qs, tau, ws);
  if (st == Status::Ok) qr_result(n, Qs, Q);
  return st;
}

#define ASTERIA_MATFN_INSTANTIATE(Real)                                                                   \
  template struct Scratch<Real>;                                                                          \
  template bool all_finite<Real>(int64_t, const Real*);                                                   \
  template Status eigh<Real>(int, const Real*, Real*, Real*, Workspace&);                                 \
  template Status inverse_root_eigh<Real>(int, const Real*, double, double, Real*, Workspace&);           \
  template Status inverse_root_scales<Real>(int, Real*, double, double);                                  \
  template Status inverse_root_newton<Real>(int, const Real*, int, double, Real*, Workspace&, int, double); \
  template Status eigenbasis_descending<Real>(int, const Real*, Real*, Workspace&);                       \
  template Status qr_refresh<Real>(int, const Real*, Real*, std::vector<int>&, Workspace&, bool);
ASTERIA_MATFN_INSTANTIATE(double)
ASTERIA_MATFN_INSTANTIATE(float)
#undef ASTERIA_MATFN_INSTANTIATE

// The Precision overloads: fp64 data through fp32 staging buffers.
namespace {

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
  float* a = grown(ws.in, nn);
  float* o = grown(ws.out, nn);
  narrow(nn, A, a);
  if (fp32(a, o) != Status::Ok) return fp64();
  widen(nn, o, out);
  return Status::Ok;
}

Status inverse_root_eigh_part(int part, Precision precision, int n, const double* A, double p, double eps,
                              double* out, PartCarry& c, Workspace& ws) {
  const int64_t nn = static_cast<int64_t>(n) * n;
  ASTERIA_ASSERT(part >= 0 && part < kInverseRootEighParts);
  if (precision == Precision::Float64) {
    Scratch<double>& s = ws.f64;
    s.reserve(n);
    c.m64.resize(nn);
    c.v64.resize(n);
    if (part == 0) return eigh(n, A, c.v64.data(), c.m64.data(), ws);
    return root_from_eigen(n, c.m64.data(), c.v64.data(), p, eps, out, s.b.data());
  }
  if (part == 0) {
    c.m32.resize(nn);
    c.v32.resize(n);
    float* a = grown(ws.in, nn);
    narrow(nn, A, a);
    c.fp32_failed = eigh(n, a, c.v32.data(), c.m32.data(), ws) != Status::Ok;
    return Status::Ok;
  }
  if (!c.fp32_failed) {
    Scratch<float>& s = ws.f32;
    s.reserve(n);
    float* o = grown(ws.out, nn);
    if (root_from_eigen(n, c.m32.data(), c.v32.data(), p, eps, o, s.b.data()) == Status::Ok) {
      widen(nn, o, out);
      return Status::Ok;
    }
  }
  return inverse_root_eigh<double>(n, A, p, eps, out, ws);
}

Status inverse_root_eigh(Precision precision, int n, const double* A, double p, double eps, double* out,
                         Workspace& ws) {
  Status st = Status::Ok;
  for (int part = 0; part < kInverseRootEighParts && st == Status::Ok; ++part)
    st = inverse_root_eigh_part(part, precision, n, A, p, eps, out, ws.carry, ws);
  return st;
}

Status inverse_root_newton(Precision precision, int n, const double* A, int p, double eps, double* out,
                           Workspace& ws) {
  auto fp64 = [&] { return inverse_root_newton<double>(n, A, p, eps, out, ws); };
  if (precision == Precision::Float64) return fp64();
  return fp32_or_fp64(n, A, out, ws, [&](const float* a, float* o) { return inverse_root_newton<float>(n, a, p, eps, o, ws); },
                      fp64);
}

Status qr_refresh_part(int part, Precision precision, int n, const double* L, double* Q, std::vector<int>& perm,
                       PartCarry& c, Workspace& ws, bool sort) {
  const int64_t nn = static_cast<int64_t>(n) * n;
  ASTERIA_ASSERT(part >= 0 && part < kQrRefreshParts);
  const int64_t qs_size = static_cast<int64_t>(n) * qr_ld(n);
  if (precision == Precision::Float64) {
    c.m64.resize(qs_size);
    c.v64.resize(n);
    double* Qs = c.m64.data();
    if (part == 0) return qr_power(n, L, Q, perm, Qs, ws, sort);
    if (part == 1) return qr_factor(n, Qs, c.v64.data(), ws);
    const Status st = qr_form(n, Qs, c.v64.data(), ws);
    if (st == Status::Ok) qr_result(n, Qs, Q);
    return st;
  }
  // fp32: the basis is rounded with L in part 0; a failure of any part leaves the fp64
  // computation to the last part (L and Q are unchanged until then).
  if (part == 0) {
    c.m32.resize(qs_size);
    c.v32.resize(n);
    float* l = grown(ws.in, nn);
    float* q = grown(ws.out, nn);
    narrow(nn, L, l);
    narrow(nn, Q, q);
    c.fp32_failed = qr_power(n, l, q, perm, c.m32.data(), ws, sort) != Status::Ok;
    return Status::Ok;
  }
  if (part == 1) {
    if (!c.fp32_failed) c.fp32_failed = qr_factor(n, c.m32.data(), c.v32.data(), ws) != Status::Ok;
    return Status::Ok;
  }
  if (!c.fp32_failed && qr_form(n, c.m32.data(), c.v32.data(), ws) == Status::Ok) {
    qr_result(n, c.m32.data(), Q);
    return Status::Ok;
  }
  return qr_refresh<double>(n, L, Q, perm, ws, sort);
}

Status qr_refresh(Precision precision, int n, const double* L, double* Q, std::vector<int>& perm,
                  Workspace& ws, bool sort) {
  Status st = Status::Ok;
  for (int part = 0; part < kQrRefreshParts && st == Status::Ok; ++part)
    st = qr_refresh_part(part, precision, n, L, Q, perm, ws.carry, ws, sort);
  return st;
}

}  // namespace asteria::matfn
