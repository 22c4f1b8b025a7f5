// The CUDA eigh and inverse root (cuSOLVER, optim/cuda/matrix_functions.cu) against the CPU's
// (LAPACK) on the same symmetric matrices: eigenvalues within rounding of the largest (two
// eigensolvers differ by a few ulps times n); eigenvectors by the residual ||A V - V diag(w)||,
// which also checks that V is row-major with eigenvectors as columns (signs and the order
// within clusters are free, so no elementwise comparison); the root within rounding; and the
// same statuses for a singular and a non-finite input; SOAP's QR refresh (the same re-sort and
// basis). Skipped without a device.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "device_fixture.hpp"
#include "optim/matrix_functions.hpp"

namespace asteria {
namespace {

template <class Real>
std::vector<Real> spd(int n, unsigned seed, int rank = -1) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> g;
  const int k = rank < 0 ? n : rank;
  std::vector<double> G(static_cast<size_t>(n) * k);
  for (double& x : G) x = g(rng);
  std::vector<Real> A(static_cast<size_t>(n) * n);
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j) {
      double s = 0;
      for (int c = 0; c < k; ++c) s += G[i * k + c] * G[j * k + c];
      A[i * n + j] = static_cast<Real>(s / k);
    }
  return A;
}

template <class Real>
class MatfnOnCuda : public testing::OnDevice {
 protected:
  static double tol() { return std::is_same_v<Real, double> ? 1e-10 : 1e-4; }
};

using Types = ::testing::Types<double, float>;
TYPED_TEST_SUITE(MatfnOnCuda, Types);

TYPED_TEST(MatfnOnCuda, EighMatchesLapack) {
  using Real = TypeParam;
  for (int n : {1, 5, 64, 257}) {
    const std::vector<Real> A = spd<Real>(n, 7 + n);
    matfn::Workspace ws;
    std::vector<Real> w_cpu(n), V_cpu(static_cast<size_t>(n) * n);
    ASSERT_EQ(matfn::eigh(n, A.data(), w_cpu.data(), V_cpu.data(), ws), matfn::Status::Ok);
    Real* dA = this->up(A);
    Real* dw = this->up(std::vector<Real>(n));
    Real* dV = this->up(std::vector<Real>(A.size()));
    ASSERT_EQ(matfn::cuda::eigh(n, dA, dw, dV), matfn::Status::Ok) << "n " << n;
    const std::vector<Real> w = this->down(dw, n), V = this->down(dV, A.size());
    const double wmax = std::fabs(w_cpu[n - 1]);
    for (int j = 0; j < n; ++j) EXPECT_NEAR(w[j], w_cpu[j], this->tol() * n * wmax) << "eigenvalue " << j << ", n " << n;
    double res = 0, norm = 0;
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < n; ++j) {
        double av = 0;
        for (int k = 0; k < n; ++k) av += double(A[i * n + k]) * V[k * n + j];
        const double r = av - double(V[i * n + j]) * w[j];
        res += r * r;
        norm += double(A[i * n + j]) * A[i * n + j];
      }
    EXPECT_LE(std::sqrt(res), this->tol() * n * std::sqrt(norm)) << "n " << n;
  }
}

TYPED_TEST(MatfnOnCuda, InverseRootMatchesLapack) {
  using Real = TypeParam;
  for (int n : {1, 5, 64, 257}) {
    const std::vector<Real> A = spd<Real>(n, 11 + n);
    matfn::Workspace ws;
    std::vector<Real> want(A.size());
    ASSERT_EQ(matfn::inverse_root_eigh(n, A.data(), 4.0, 1e-6, want.data(), ws), matfn::Status::Ok);
    Real* dout = this->up(std::vector<Real>(A.size()));
    ASSERT_EQ(matfn::cuda::inverse_root_eigh(n, this->up(A), 4.0, 1e-6, dout), matfn::Status::Ok);
    const std::vector<Real> got = this->down(dout, A.size());
    double d = 0, s = 0;
    for (size_t i = 0; i < A.size(); ++i) {
      d += (double(got[i]) - want[i]) * (double(got[i]) - want[i]);
      s += double(want[i]) * want[i];
    }
    EXPECT_LE(std::sqrt(d), 10 * this->tol() * n * std::sqrt(s)) << "n " << n;
  }
}

// SOAP's refresh: the same re-sort (perm) and the same basis, column by column up to its sign
// (Householder QR fixes the signs by R's diagonal; two implementations may still differ there).
TYPED_TEST(MatfnOnCuda, QrRefreshMatchesLapack) {
  using Real = TypeParam;
  for (int n : {1, 6, 64, 200}) {
    // Well conditioned (eigenvalues in [1, 5]), so that QR's rounding stays near epsilon.
    std::vector<Real> L = spd<Real>(n, 21 + n);
    for (int i = 0; i < n; ++i) L[i * n + i] += 1;
    matfn::Workspace ws;
    std::vector<Real> Q(static_cast<size_t>(n) * n);
    ASSERT_EQ(matfn::eigenbasis_descending(n, spd<Real>(n, 40 + n).data(), Q.data(), ws), matfn::Status::Ok);
    std::vector<Real> want = Q;
    std::vector<int> perm_cpu, perm_gpu;
    ASSERT_EQ(matfn::qr_refresh(n, L.data(), want.data(), perm_cpu, ws), matfn::Status::Ok);
    Real* dQ = this->up(Q);
    ASSERT_EQ(matfn::cuda::qr_refresh(n, this->up(L), dQ, perm_gpu), matfn::Status::Ok) << "n " << n;
    EXPECT_EQ(perm_gpu, perm_cpu) << "n " << n;
    const std::vector<Real> got = this->down(dQ, Q.size());
    double diff = 0;   // ||Q_gpu S - Q_cpu||_F with S the column signs; ||Q_cpu||_F^2 = n
    for (int k = 0; k < n; ++k) {
      double dot = 0;
      for (int i = 0; i < n; ++i) dot += double(got[i * n + k]) * want[i * n + k];
      const double sign = dot < 0 ? -1 : 1;
      for (int i = 0; i < n; ++i) diff += std::pow(sign * got[i * n + k] - want[i * n + k], 2);
    }
    EXPECT_LE(std::sqrt(diff / n), (std::is_same_v<Real, double> ? 1e-11 : 1e-5) * n) << "n " << n;
  }
}

TYPED_TEST(MatfnOnCuda, SingularAndNonFiniteInputsGiveTheCpuStatus) {
  using Real = TypeParam;
  const int n = 16;
  const std::vector<Real> singular = spd<Real>(n, 3, /*rank=*/4);
  matfn::Workspace ws;
  std::vector<Real> out(singular.size());
  Real* dout = this->up(out);
  EXPECT_EQ(matfn::inverse_root_eigh(n, singular.data(), 4.0, 0.0, out.data(), ws), matfn::Status::NotPositive);
  EXPECT_EQ(matfn::cuda::inverse_root_eigh(n, this->up(singular), 4.0, 0.0, dout), matfn::Status::NotPositive);
  std::vector<Real> bad = spd<Real>(n, 4);
  bad[5] = std::numeric_limits<Real>::quiet_NaN();
  std::vector<Real> w(n);
  EXPECT_EQ(matfn::eigh(n, bad.data(), w.data(), out.data(), ws), matfn::Status::NonFinite);
  EXPECT_EQ(matfn::cuda::eigh(n, this->up(bad), this->up(w), dout), matfn::Status::NonFinite);
}

}  // namespace
}  // namespace asteria
