// The second-order optimizers' per-step helpers on CUDA (optim/block_math.hpp, namespace
// blockmath::cuda) against the CPU's on the same inputs: the factor statistics (SYRK, mirrored)
// and the basis changes within fp32 rounding of products (norm-wise 1e-5, as the ops test),
// SOAP's moments bit for bit (the same IEEE operations, no fused multiply-adds on either side).
// Skipped without a device.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <tuple>
#include <vector>

#include "device_fixture.hpp"
#include "optim/block_math.hpp"

namespace asteria {
namespace {

using testing::random_vector;

std::vector<float> symmetric(int64_t n, unsigned seed) {
  std::vector<float> s = random_vector(static_cast<size_t>(n * n), seed);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < i; ++j) s[i * n + j] = s[j * n + i];
  return s;
}

double relative(const std::vector<float>& got, const std::vector<float>& want) {
  double d = 0, w = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    d += (double(got[i]) - want[i]) * (double(got[i]) - want[i]);
    w += double(want[i]) * want[i];
  }
  return w > 0 ? std::sqrt(d / w) : std::sqrt(d);
}

using BlockMathOnCuda = testing::OnDevice;

const std::tuple<int64_t, int64_t> kShapes[] = {{1, 1}, {7, 5}, {64, 48}, {130, 257}};

TEST_F(BlockMathOnCuda, FactorStatisticsMatchTheCpu) {
  for (auto [m, n] : kShapes) {
    const auto G = random_vector(static_cast<size_t>(m * n), 1);
    std::vector<float> L = symmetric(m, 2), R = symmetric(n, 3);
    float* dL = up(L);
    float* dR = up(R);
    blockmath::accumulate_left(G.data(), m, n, 0.9f, 0.1f, L.data());
    blockmath::accumulate_right(G.data(), m, n, 0.9f, 0.1f, R.data());
    const float* dG = up(G);
    blockmath::cuda::accumulate_left(dG, m, n, 0.9f, 0.1f, dL);
    blockmath::cuda::accumulate_right(dG, m, n, 0.9f, 0.1f, dR);
    EXPECT_LE(relative(down(dL, L.size()), L), 1e-5) << m << " x " << n;
    EXPECT_LE(relative(down(dR, R.size()), R), 1e-5) << m << " x " << n;
  }
}

TEST_F(BlockMathOnCuda, BasisChangesMatchTheCpu) {
  for (auto [m, n] : kShapes) {
    const auto QL = random_vector(static_cast<size_t>(m * m), 4), QR = random_vector(static_cast<size_t>(n * n), 5);
    const auto X = random_vector(static_cast<size_t>(m * n), 6);
    std::vector<float> tmp(X.size()), to(X.size()), from(X.size());
    blockmath::to_basis(QL.data(), X.data(), QR.data(), m, n, tmp.data(), to.data());
    blockmath::from_basis(QL.data(), X.data(), QR.data(), m, n, tmp.data(), from.data());
    float *dQL = up(QL), *dQR = up(QR), *dX = up(X), *dtmp = up(tmp), *dto = up(tmp), *dfrom = up(tmp);
    blockmath::cuda::to_basis(dQL, dX, dQR, m, n, dtmp, dto);
    blockmath::cuda::from_basis(dQL, dX, dQR, m, n, dtmp, dfrom);
    EXPECT_LE(relative(down(dto, to.size()), to), 1e-5) << m << " x " << n;
    EXPECT_LE(relative(down(dfrom, from.size()), from), 1e-5) << m << " x " << n;
  }
}

TEST_F(BlockMathOnCuda, SoapMomentsAreBitIdentical) {
  const size_t n = 10007;
  std::vector<float> M = random_vector(n, 7), V = random_vector(n, 8), G = random_vector(n, 9);
  for (float& v : V) v = std::fabs(v);
  float *dM = up(M), *dV = up(V), *dG = up(G);
  blockmath::soap_moments(M.data(), V.data(), G.data(), n, 0.95f, 0.95f, 0.05f, 0.05f, 1e-8f);
  blockmath::cuda::soap_moments(dM, dV, dG, n, 0.95f, 0.95f, 0.05f, 0.05f, 1e-8f);
  for (auto [want, got] : {std::pair{&M, dM}, {&V, dV}, {&G, dG}})
    EXPECT_EQ(std::memcmp(down(got, n).data(), want->data(), n * sizeof(float)), 0);
}

}  // namespace
}  // namespace asteria
