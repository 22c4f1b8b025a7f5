// Matrix functions against hand-derived matrices.
#include <gtest/gtest.h>
#include <lapacke.h>
#include <sys/resource.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "optim/matrix_functions.hpp"

using namespace asteria::matfn;

namespace {

// Q = H4 / 2, the symmetric orthogonal Hadamard matrix; A = Q diag(1, 16, 81, 256) Q.
std::vector<double> hadamard_q() {
  const double h[16] = {1, 1, 1, 1, 1, -1, 1, -1, 1, 1, -1, -1, 1, -1, -1, 1};
  std::vector<double> q(16);
  for (int i = 0; i < 16; ++i) q[i] = h[i] / 2;
  return q;
}

std::vector<double> hadamard_a() {
  auto q = hadamard_q();
  const double d[4] = {1, 16, 81, 256};
  std::vector<double> a(16, 0.0);
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j)
      for (int k = 0; k < 4; ++k) a[i * 4 + j] += q[i * 4 + k] * d[k] * q[k * 4 + j];
  return a;
}

const std::vector<double> kHadamardRoot4 = [] {  // A^(-1/4) = (1/48) [...]
  std::vector<double> m = {25, 7, 11, 5, 7, 25, 5, 11, 11, 5, 25, 7, 5, 11, 7, 25};
  for (auto& x : m) x /= 48;
  return m;
}();
const std::vector<double> kHadamardRoot2 = [] {  // A^(-1/2) = (1/576) [...]
  std::vector<double> m = {205, 115, 155, 101, 115, 205, 101, 155, 155, 101, 205, 115, 101, 155, 115, 205};
  for (auto& x : m) x /= 576;
  return m;
}();

// A = B^(-2) for B below (condition number of A about 7e5), so A^(-1/2) = B.
const std::vector<double> kIllA = {1195, -944, -224, -944, 746, 177, -224, 177, 42};
const std::vector<double> kIllB = {1, 1, 1, 1, 2, -3, 1, -3, 18};

void expect_matrix_near(const std::vector<double>& got, const std::vector<double>& want, double rel_tol) {
  double scale = 0;
  for (double x : want) scale = std::max(scale, std::abs(x));
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], want[i], rel_tol * scale) << "entry " << i;
}

}  // namespace

TEST(MatrixFunctions, HandDerivedMatricesAreConsistent) {
  // B^-2 = A  <=>  B A B = I.
  std::vector<double> ba(9, 0.0), bab(9, 0.0);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 3; ++k) ba[i * 3 + j] += kIllB[i * 3 + k] * kIllA[k * 3 + j];
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 3; ++k) bab[i * 3 + j] += ba[i * 3 + k] * kIllB[k * 3 + j];
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) EXPECT_NEAR(bab[i * 3 + j], i == j ? 1.0 : 0.0, 1e-9);
}

TEST(MatrixFunctions, EighRecoversEigenvaluesAndVectors) {
  Workspace ws;
  auto a = hadamard_a();
  std::vector<double> w(4), v(16);
  ASSERT_EQ(eigh(4, a.data(), w.data(), v.data(), ws), Status::Ok);
  const double want[4] = {1, 16, 81, 256};
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(w[i], want[i], 1e-10);
  // Each eigenvector is +-(column of Q).
  auto q = hadamard_q();
  for (int j = 0; j < 4; ++j) {
    double dot = 0;
    for (int i = 0; i < 4; ++i) dot += v[i * 4 + j] * q[i * 4 + j];
    EXPECT_NEAR(std::abs(dot), 1.0, 1e-12);
  }
  std::vector<double> w3(3), v3(9);
  ASSERT_EQ(eigh(3, kIllA.data(), w3.data(), v3.data(), ws), Status::Ok);
  EXPECT_GT(w3[2] / w3[0], 5e5);
  EXPECT_LT(w3[2] / w3[0], 1e6);
}

TEST(MatrixFunctions, InverseRootsByEighMatchHandDerived) {
  Workspace ws;
  auto a = hadamard_a();
  std::vector<double> out(16);
  ASSERT_EQ(inverse_root_eigh(4, a.data(), 4, 0.0, out.data(), ws), Status::Ok);
  expect_matrix_near(out, kHadamardRoot4, 1e-12);
  ASSERT_EQ(inverse_root_eigh(4, a.data(), 2, 0.0, out.data(), ws), Status::Ok);
  expect_matrix_near(out, kHadamardRoot2, 1e-12);
  std::vector<double> out3(9);
  ASSERT_EQ(inverse_root_eigh(3, kIllA.data(), 2, 0.0, out3.data(), ws), Status::Ok);
  expect_matrix_near(out3, kIllB, 1e-8);
}

TEST(MatrixFunctions, InverseRootsByCoupledNewtonMatchHandDerived) {
  Workspace ws;
  auto a = hadamard_a();
  std::vector<double> out(16);
  ASSERT_EQ(inverse_root_newton(4, a.data(), 4, 0.0, out.data(), ws), Status::Ok);
  expect_matrix_near(out, kHadamardRoot4, 1e-10);
  ASSERT_EQ(inverse_root_newton(4, a.data(), 2, 0.0, out.data(), ws), Status::Ok);
  expect_matrix_near(out, kHadamardRoot2, 1e-10);
  std::vector<double> out3(9);
  ASSERT_EQ(inverse_root_newton(3, kIllA.data(), 2, 0.0, out3.data(), ws, 200, 1e-11), Status::Ok);
  expect_matrix_near(out3, kIllB, 1e-6);
}

TEST(MatrixFunctions, EpsilonShiftsAndClampsEigenvalues) {
  Workspace ws;
  // diag(-1e-12, 3): eps = 1 gives diag(max(1 - 1e-12, 1)..) ~ diag(1, 4)^(-1/2) = diag(1, 0.5).
  std::vector<double> a = {-1e-12, 0, 0, 3}, out(4);
  ASSERT_EQ(inverse_root_eigh(2, a.data(), 2, 1.0, out.data(), ws), Status::Ok);
  EXPECT_NEAR(out[0], 1.0, 1e-9);
  EXPECT_NEAR(out[3], 0.5, 1e-12);
  // Without eps a singular matrix has no inverse root.
  std::vector<double> sing = {1, 1, 1, 1};
  EXPECT_EQ(inverse_root_eigh(2, sing.data(), 2, 0.0, out.data(), ws), Status::NotPositive);
  // A negative eigenvalue far below -eps is clamped at eps: (-5 + 1) -> 1.
  std::vector<double> neg = {-5, 0, 0, 3};
  ASSERT_EQ(inverse_root_eigh(2, neg.data(), 2, 1.0, out.data(), ws), Status::Ok);
  EXPECT_NEAR(out[0], 1.0, 1e-12);
}

TEST(MatrixFunctions, NonFiniteInputIsReportedNotPropagated) {
  Workspace ws;
  std::vector<double> a = {1, std::numeric_limits<double>::quiet_NaN(), 0, 1}, out(4, 7.0), w(2), v(4);
  EXPECT_EQ(eigh(2, a.data(), w.data(), v.data(), ws), Status::NonFinite);
  EXPECT_EQ(inverse_root_eigh(2, a.data(), 4, 1e-6, out.data(), ws), Status::NonFinite);
  EXPECT_EQ(inverse_root_newton(2, a.data(), 4, 1e-6, out.data(), ws), Status::NonFinite);
  std::vector<int> perm;
  std::vector<double> q = {1, 0, 0, 1};
  EXPECT_EQ(qr_refresh(2, a.data(), q.data(), perm, ws), Status::NonFinite);
  EXPECT_EQ(q[0], 1.0);  // the previous basis is untouched
}

TEST(MatrixFunctions, QrRefreshSortsDescendingAndConvergesToEigenbasis) {
  Workspace ws;
  auto a = hadamard_a();
  auto q = hadamard_q();
  // Start from the exact eigenbasis in ascending order (1, 16, 81, 256): one refresh must put
  // the 256-vector first (perm reverses) and keep the basis (up to signs).
  std::vector<double> basis = q;
  std::vector<int> perm;
  ASSERT_EQ(qr_refresh(4, a.data(), basis.data(), perm, ws), Status::Ok);
  EXPECT_EQ(perm, (std::vector<int>{3, 2, 1, 0}));
  for (int k = 0; k < 4; ++k) {
    double dot = 0;
    for (int i = 0; i < 4; ++i) dot += basis[i * 4 + k] * q[i * 4 + (3 - k)];
    EXPECT_NEAR(std::abs(dot), 1.0, 1e-12);
  }
  // From a rotated start, repeated refreshes (power iteration) converge to the eigenbasis.
  std::vector<double> start = {1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1};
  for (int it = 0; it < 60; ++it) ASSERT_EQ(qr_refresh(4, a.data(), start.data(), perm, ws), Status::Ok);
  for (int k = 0; k < 4; ++k) {
    double dot = 0;
    for (int i = 0; i < 4; ++i) dot += start[i * 4 + k] * q[i * 4 + (3 - k)];
    EXPECT_NEAR(std::abs(dot), 1.0, 1e-8) << "column " << k;
  }
  // The descending eigenbasis directly.
  std::vector<double> eb(16);
  ASSERT_EQ(eigenbasis_descending(4, a.data(), eb.data(), ws), Status::Ok);
  for (int k = 0; k < 4; ++k) {
    double dot = 0;
    for (int i = 0; i < 4; ++i) dot += eb[i * 4 + k] * q[i * 4 + (3 - k)];
    EXPECT_NEAR(std::abs(dot), 1.0, 1e-12);
  }
}

// ---- fp32 (optim.refresh_dtype float32): the same functions in float against the same
// hand-derived matrices and against fp64, with tolerances of fp32 roundoff.

namespace {

std::vector<float> to_f32(const std::vector<double>& x) { return std::vector<float>(x.begin(), x.end()); }

void expect_matrix_near(const std::vector<float>& got, const std::vector<double>& want, double rel_tol) {
  expect_matrix_near(std::vector<double>(got.begin(), got.end()), want, rel_tol);
}

// A random symmetric matrix with eigenvalues in [1.25, 3.25] (G G^T / 4n + I, G n x 4n).
std::vector<double> well_conditioned_spd(int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> nd;
  const int k = 4 * n;
  std::vector<double> g(static_cast<size_t>(n) * k), a(static_cast<size_t>(n) * n, 0.0);
  for (auto& x : g) x = nd(rng);
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j) {
      for (int l = 0; l < k; ++l) a[i * n + j] += g[i * k + l] * g[j * k + l] / k;
      if (i == j) a[i * n + j] += 1.0;
    }
  return a;
}

// max |Q^T Q - I|.
template <class Real>
double orthonormality_error(int n, const std::vector<Real>& q) {
  double err = 0;
  for (int a = 0; a < n; ++a)
    for (int b = 0; b < n; ++b) {
      double dot = 0;
      for (int i = 0; i < n; ++i) dot += static_cast<double>(q[i * n + a]) * q[i * n + b];
      err = std::max(err, std::abs(dot - (a == b ? 1.0 : 0.0)));
    }
  return err;
}

}  // namespace

TEST(MatrixFunctionsFloat32, EighRecoversEigenvaluesAndVectors) {
  Workspace ws;
  auto a = to_f32(hadamard_a());
  std::vector<float> w(4), v(16);
  ASSERT_EQ(eigh(4, a.data(), w.data(), v.data(), ws), Status::Ok);
  const double want[4] = {1, 16, 81, 256};
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(w[i], want[i], 1e-5 * 256) << i;
  auto q = hadamard_q();
  for (int j = 0; j < 4; ++j) {
    double dot = 0;
    for (int i = 0; i < 4; ++i) dot += v[i * 4 + j] * q[i * 4 + j];
    EXPECT_NEAR(std::abs(dot), 1.0, 1e-5) << j;
  }
}

TEST(MatrixFunctionsFloat32, InverseRootsByEighMatchHandDerivedAndFp64) {
  Workspace ws;
  auto a = to_f32(hadamard_a());
  std::vector<float> out(16);
  ASSERT_EQ(inverse_root_eigh(4, a.data(), 4, 0.0, out.data(), ws), Status::Ok);
  expect_matrix_near(out, kHadamardRoot4, 1e-5);
  ASSERT_EQ(inverse_root_eigh(4, a.data(), 2, 0.0, out.data(), ws), Status::Ok);
  expect_matrix_near(out, kHadamardRoot2, 1e-5);
  // fp64 data through the Precision overload: Float32 rounds and differs from Float64 by fp32
  // roundoff only; Float64 is exactly the fp64 function.
  const int n = 40;
  auto spd = well_conditioned_spd(n, 1);
  std::vector<double> r64(n * n), r32(n * n), direct(n * n);
  ASSERT_EQ(inverse_root_eigh(Precision::Float64, n, spd.data(), 4.0, 1e-12, r64.data(), ws), Status::Ok);
  ASSERT_EQ(inverse_root_eigh(n, spd.data(), 4.0, 1e-12, direct.data(), ws), Status::Ok);
  EXPECT_EQ(r64, direct);
  ASSERT_EQ(inverse_root_eigh(Precision::Float32, n, spd.data(), 4.0, 1e-12, r32.data(), ws), Status::Ok);
  expect_matrix_near(r32, r64, 1e-5);
  EXPECT_NE(r32, r64);  // computed in fp32, not fp64
}

TEST(MatrixFunctionsFloat32, InverseRootsByCoupledNewtonMatchHandDerivedAndFp64) {
  Workspace ws;
  auto a = to_f32(hadamard_a());
  std::vector<float> out(16);
  ASSERT_EQ(inverse_root_newton(4, a.data(), 4, 0.0, out.data(), ws), Status::Ok);
  expect_matrix_near(out, kHadamardRoot4, 1e-4);
  ASSERT_EQ(inverse_root_newton(4, a.data(), 2, 0.0, out.data(), ws), Status::Ok);
  expect_matrix_near(out, kHadamardRoot2, 1e-4);
  // fp64's tolerance is below fp32 roundoff: the iteration cannot reach it.
  EXPECT_EQ(inverse_root_newton(4, a.data(), 4, 0.0, out.data(), ws, 100, 1e-12), Status::NotConverged);
  const int n = 40;
  auto spd = well_conditioned_spd(n, 2);
  std::vector<double> r64(n * n), r32(n * n);
  ASSERT_EQ(inverse_root_newton(Precision::Float64, n, spd.data(), 4, 0.0, r64.data(), ws), Status::Ok);
  ASSERT_EQ(inverse_root_newton(Precision::Float32, n, spd.data(), 4, 0.0, r32.data(), ws), Status::Ok);
  expect_matrix_near(r32, r64, 1e-4);
}

TEST(MatrixFunctionsFloat32, EpsilonShiftsClampsAndSingularThresholdUsesFp32Epsilon) {
  Workspace ws;
  std::vector<float> a = {-1e-12f, 0, 0, 3}, out(4);
  ASSERT_EQ(inverse_root_eigh(2, a.data(), 2, 1.0, out.data(), ws), Status::Ok);
  EXPECT_NEAR(out[0], 1.0, 1e-6);
  EXPECT_NEAR(out[3], 0.5, 1e-6);
  std::vector<float> sing = {1, 1, 1, 1};
  EXPECT_EQ(inverse_root_eigh(2, sing.data(), 2, 0.0, out.data(), ws), Status::NotPositive);
  std::vector<float> neg = {-5, 0, 0, 3};
  ASSERT_EQ(inverse_root_eigh(2, neg.data(), 2, 1.0, out.data(), ws), Status::Ok);
  EXPECT_NEAR(out[0], 1.0, 1e-6);
  // diag(1, 1e-9): above fp64's singular threshold (2 * 2.2e-16), below fp32's (2 * 1.2e-7).
  std::vector<double> tiny64 = {1, 0, 0, 1e-9}, out64(4);
  std::vector<float> tiny32 = to_f32(tiny64);
  EXPECT_EQ(inverse_root_eigh(2, tiny64.data(), 2, 0.0, out64.data(), ws), Status::Ok);
  EXPECT_EQ(inverse_root_eigh(2, tiny32.data(), 2, 0.0, out.data(), ws), Status::NotPositive);
  // Through the fp64-data overload the fp32 failure is retried in fp64: fp64's bits.
  std::vector<double> retried(4);
  EXPECT_EQ(inverse_root_eigh(Precision::Float32, 2, tiny64.data(), 2, 0.0, retried.data(), ws), Status::Ok);
  EXPECT_EQ(retried, out64);
}

TEST(MatrixFunctionsFloat32, NonFiniteInputIsReportedNotPropagated) {
  Workspace ws;
  std::vector<float> a = {1, std::numeric_limits<float>::quiet_NaN(), 0, 1}, out(4, 7.0f), w(2), v(4);
  EXPECT_EQ(eigh(2, a.data(), w.data(), v.data(), ws), Status::NonFinite);
  EXPECT_EQ(inverse_root_eigh(2, a.data(), 4, 1e-6, out.data(), ws), Status::NonFinite);
  EXPECT_EQ(inverse_root_newton(2, a.data(), 4, 1e-6, out.data(), ws), Status::NonFinite);
  std::vector<int> perm;
  std::vector<float> q = {1, 0, 0, 1};
  EXPECT_EQ(qr_refresh(2, a.data(), q.data(), perm, ws), Status::NonFinite);
  EXPECT_EQ(q[0], 1.0f);
  // fp64 data beyond the fp32 range is non-finite in fp32 and fine in fp64: the fp32 request is
  // retried in fp64 and gives fp64's bits.
  std::vector<double> big = {1e39, 0, 0, 5e38}, want(4), out64(4, 7.0);  // well conditioned
  ASSERT_EQ(inverse_root_eigh(Precision::Float64, 2, big.data(), 4, 1e-6, want.data(), ws), Status::Ok);
  EXPECT_EQ(inverse_root_eigh(Precision::Float32, 2, big.data(), 4, 1e-6, out64.data(), ws), Status::Ok);
  EXPECT_EQ(out64, want);
  ASSERT_EQ(inverse_root_newton(Precision::Float64, 2, big.data(), 4, 1e-6, want.data(), ws), Status::Ok);
  EXPECT_EQ(inverse_root_newton(Precision::Float32, 2, big.data(), 4, 1e-6, out64.data(), ws), Status::Ok);
  EXPECT_EQ(out64, want);
  std::vector<double> q_want = {1, 0, 0, 1}, q64 = {1, 0, 0, 1};
  std::vector<int> perm_want;
  ASSERT_EQ(qr_refresh(Precision::Float64, 2, big.data(), q_want.data(), perm_want, ws), Status::Ok);
  EXPECT_EQ(qr_refresh(Precision::Float32, 2, big.data(), q64.data(), perm, ws), Status::Ok);
  EXPECT_EQ(q64, q_want);
  EXPECT_EQ(perm, perm_want);
  // Non-finite in fp64 too: reported, outputs untouched.
  std::vector<double> nan64 = {1, std::numeric_limits<double>::quiet_NaN(), 0, 1};
  out64.assign(4, 7.0);
  EXPECT_EQ(inverse_root_eigh(Precision::Float32, 2, nan64.data(), 4, 1e-6, out64.data(), ws), Status::NonFinite);
  EXPECT_EQ(out64, std::vector<double>(4, 7.0));
}

TEST(MatrixFunctionsFloat32, QrRefreshSortsDescendingStaysOrthonormalAndConverges) {
  Workspace ws;
  auto a = to_f32(hadamard_a());
  auto q = hadamard_q();
  std::vector<float> basis = to_f32(q);
  std::vector<int> perm;
  ASSERT_EQ(qr_refresh(4, a.data(), basis.data(), perm, ws), Status::Ok);
  EXPECT_EQ(perm, (std::vector<int>{3, 2, 1, 0}));
  EXPECT_LT(orthonormality_error(4, basis), 1e-6);
  for (int k = 0; k < 4; ++k) {
    double dot = 0;
    for (int i = 0; i < 4; ++i) dot += basis[i * 4 + k] * q[i * 4 + (3 - k)];
    EXPECT_NEAR(std::abs(dot), 1.0, 1e-6);
  }
  // Without sorting the order is kept.
  basis = to_f32(q);
  ASSERT_EQ(qr_refresh(4, a.data(), basis.data(), perm, ws, /*sort=*/false), Status::Ok);
  EXPECT_EQ(perm, (std::vector<int>{0, 1, 2, 3}));
  std::vector<float> start = {1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1};
  for (int it = 0; it < 60; ++it) ASSERT_EQ(qr_refresh(4, a.data(), start.data(), perm, ws), Status::Ok);
  EXPECT_LT(orthonormality_error(4, start), 1e-6);
  for (int k = 0; k < 4; ++k) {
    double dot = 0;
    for (int i = 0; i < 4; ++i) dot += start[i * 4 + k] * q[i * 4 + (3 - k)];
    EXPECT_NEAR(std::abs(dot), 1.0, 1e-5) << "column " << k;
  }
  std::vector<float> eb(16);
  ASSERT_EQ(eigenbasis_descending(4, a.data(), eb.data(), ws), Status::Ok);
  for (int k = 0; k < 4; ++k) {
    double dot = 0;
    for (int i = 0; i < 4; ++i) dot += eb[i * 4 + k] * q[i * 4 + (3 - k)];
    EXPECT_NEAR(std::abs(dot), 1.0, 1e-6);
  }
}

TEST(MatrixFunctionsFloat32, QrRefreshOfFp64DataMatchesFp64) {
  Workspace ws;
  const int n = 40;
  auto l = well_conditioned_spd(n, 3);
  std::vector<double> q64(n * n, 0.0);
  for (int i = 0; i < n; ++i) q64[i * n + i] = 1.0;
  std::vector<double> q32 = q64;
  std::vector<int> p64, p32;
  for (int it = 0; it < 3; ++it) {
    ASSERT_EQ(qr_refresh(Precision::Float64, n, l.data(), q64.data(), p64, ws), Status::Ok);
    ASSERT_EQ(qr_refresh(Precision::Float32, n, l.data(), q32.data(), p32, ws), Status::Ok);
    EXPECT_EQ(p32, p64) << "refresh " << it;
    expect_matrix_near(q32, q64, 1e-4);
    EXPECT_LT(orthonormality_error(n, q32), 1e-5);
  }
  EXPECT_NE(q32, q64);
}

// ---- LAPACK on the workspace: the same routines LAPACKE's row-major drivers call, on the
// workspace's transposed copy (a QR refresh: its padded column-major carry) and work arrays
// instead of ones allocated on every call.

namespace {

// Minor page faults of the calling thread so far (fresh memory touched).
long thread_minor_faults() {
  rusage u{};
  getrusage(RUSAGE_THREAD, &u);
  return u.ru_minflt;
}

template <class Real>
void expect_same_bits(const std::vector<Real>& got, const std::vector<Real>& want, const char* what) {
  ASSERT_EQ(got.size(), want.size());
  EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(Real)), 0) << what;
}

template <class Real>
void check_lapack_on_workspace(int n) {
  SCOPED_TRACE("n = " + std::to_string(n) + (std::is_same_v<Real, float> ? ", float" : ", double"));
  const auto a64 = well_conditioned_spd(n, 7);
  const std::vector<Real> a(a64.begin(), a64.end());
  const size_t nn = static_cast<size_t>(n) * n;
  Workspace ws;
  // eigh against LAPACKE's row-major dsyevd / ssyevd on a copy.
  std::vector<Real> w(n), v(nn), want_w(n), want_v = a;
  ASSERT_EQ(eigh(n, a.data(), w.data(), v.data(), ws), Status::Ok);
  if constexpr (std::is_same_v<Real, double>)
    ASSERT_EQ(LAPACKE_dsyevd(LAPACK_ROW_MAJOR, 'V', 'U', n, want_v.data(), n, want_w.data()), 0);
  else
    ASSERT_EQ(LAPACKE_ssyevd(LAPACK_ROW_MAJOR, 'V', 'U', n, want_v.data(), n, want_w.data()), 0);
  expect_same_bits(w, want_w, "eigenvalues");
  expect_same_bits(v, want_v, "eigenvectors");
  // qr_refresh from the identity without sorting is orgqr(geqrf(L)) on its padded column-major
  // carry (leading dimension n + 8, matrix_functions.cpp's qr_ld): the same bits as LAPACKE's
  // column-major drivers on that layout. A row-major LAPACKE call (leading dimension n) agrees to
  // rounding only: BLAS kernels may sum in another order for another leading dimension (the
  // AVX-512 ones do at n = 5).
  std::vector<Real> q(nn, Real(0)), tau(n);
  for (int i = 0; i < n; ++i) q[static_cast<size_t>(i) * n + i] = 1;
  std::vector<int> perm;
  ASSERT_EQ(qr_refresh(n, a.data(), q.data(), perm, ws, /*sort=*/false), Status::Ok);
  const int ld = n + 8;
  std::vector<Real> carry(static_cast<size_t>(ld) * n, Real(0)), want_q(nn), row_major = a;
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j) carry[static_cast<size_t>(j) * ld + i] = a[static_cast<size_t>(i) * n + j];
  if constexpr (std::is_same_v<Real, double>) {
    ASSERT_EQ(LAPACKE_dgeqrf(LAPACK_COL_MAJOR, n, n, carry.data(), ld, tau.data()), 0);
    ASSERT_EQ(LAPACKE_dorgqr(LAPACK_COL_MAJOR, n, n, n, carry.data(), ld, tau.data()), 0);
    ASSERT_EQ(LAPACKE_dgeqrf(LAPACK_ROW_MAJOR, n, n, row_major.data(), n, tau.data()), 0);
    ASSERT_EQ(LAPACKE_dorgqr(LAPACK_ROW_MAJOR, n, n, n, row_major.data(), n, tau.data()), 0);
  } else {
    ASSERT_EQ(LAPACKE_sgeqrf(LAPACK_COL_MAJOR, n, n, carry.data(), ld, tau.data()), 0);
    ASSERT_EQ(LAPACKE_sorgqr(LAPACK_COL_MAJOR, n, n, n, carry.data(), ld, tau.data()), 0);
    ASSERT_EQ(LAPACKE_sgeqrf(LAPACK_ROW_MAJOR, n, n, row_major.data(), n, tau.data()), 0);
    ASSERT_EQ(LAPACKE_sorgqr(LAPACK_ROW_MAJOR, n, n, n, row_major.data(), n, tau.data()), 0);
  }
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j) want_q[static_cast<size_t>(i) * n + j] = carry[static_cast<size_t>(j) * ld + i];
  expect_same_bits(q, want_q, "qr_refresh's basis");
  const double eps = std::numeric_limits<Real>::epsilon();
  for (size_t i = 0; i < nn; ++i) ASSERT_NEAR(q[i], row_major[i], 64 * n * eps) << "against row-major LAPACKE, " << i;
  // Sized once: the calls again touch no fresh memory (LAPACKE's would fault in a transposed
  // copy and work arrays, 2 n^2 elements and more, every call).
  const long before = thread_minor_faults();
  ASSERT_EQ(eigh(n, a.data(), w.data(), v.data(), ws), Status::Ok);
  ASSERT_EQ(qr_refresh(n, a.data(), q.data(), perm, ws, /*sort=*/false), Status::Ok);
  EXPECT_LT(thread_minor_faults() - before, 8) << "fresh pages touched by calls on a sized workspace";
}

}  // namespace

TEST(MatrixFunctions, LapackOnTheWorkspaceGivesLapackesBitsAndTouchesNoFreshMemory) {
  for (int n : {5, 37, 300}) {
    check_lapack_on_workspace<double>(n);
    check_lapack_on_workspace<float>(n);
  }
}
