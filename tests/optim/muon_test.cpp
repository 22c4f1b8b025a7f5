// optim/newton_schulz.hpp and optim/muon.hpp: the iteration against its scalar polynomial on a
// matrix whose singular vectors are signed unit vectors (G = P diag(s) Q with P, Q signed
// permutations: each singular value s_i / ||s|| follows x <- a x + b x^3 + c x^5 alone), a tall
// matrix as its transpose, and Muon's state layout (the momentum after the AdamW's moments).
// Against the authors' code: tests/integration/muon_fidelity_test.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "optim/muon.hpp"
#include "optim/newton_schulz.hpp"

namespace asteria {
namespace {

TEST(NewtonSchulz, EachSingularValueFollowsTheScalarPolynomial) {
  // 3 x 5: row i holds s_i (signed) in column col[i].
  const int rows = 3, cols = 5, col[rows] = {3, 0, 4};
  const double s[rows] = {2.0, -0.5, 0.125};
  std::vector<float> x(rows * cols, 0.0f), work(newton_schulz_work(rows, cols));
  for (int i = 0; i < rows; ++i) x[i * cols + col[i]] = static_cast<float>(s[i]);
  newton_schulz5(x.data(), rows, cols, 5, work.data());
  const double norm = std::sqrt(4.0 + 0.25 + 0.125 * 0.125) + 1e-7;
  for (int i = 0; i < rows; ++i) {
    double v = s[i] / norm;
    for (int k = 0; k < 5; ++k) v = kNewtonSchulzA * v + kNewtonSchulzB * v * v * v + kNewtonSchulzC * v * v * v * v * v;
    for (int j = 0; j < cols; ++j)
      EXPECT_NEAR(x[i * cols + j], j == col[i] ? v : 0.0, 2e-6) << i << "," << j;
  }
}

TEST(NewtonSchulz, ATallMatrixIsItsTransposesTranspose) {
  const int rows = 7, cols = 4;
  std::vector<float> tall(rows * cols), wide(rows * cols), work(newton_schulz_work(rows, cols));
  for (int i = 0; i < rows; ++i)
    for (int j = 0; j < cols; ++j) tall[i * cols + j] = wide[j * rows + i] = std::sin(1.3f * i + 0.7f * j);
  newton_schulz5(tall.data(), rows, cols, 5, work.data());
  newton_schulz5(wide.data(), cols, rows, 5, work.data());
  for (int i = 0; i < rows; ++i)
    for (int j = 0; j < cols; ++j) EXPECT_NEAR(tall[i * cols + j], wide[j * rows + i], 1e-6);
}

TEST(Muon, KeepsAMomentumPerMatrixParameterAfterTheAdamWsMoments) {
  ParamTable t;
  t.add("blocks.0.att_norm", {8}, ParamClass::Norm);
  t.add("blocks.0.att_qkv", {24, 8}, ParamClass::Matrix, 3);
  MuonParams p;
  p.compensated = false;
  Muon m(p, {t});
  const std::vector<StateTensor*> states = m.layer_states(0);
  ASSERT_EQ(states.size(), 3u);   // AdamW's m, v of the norm weights; Muon's momentum
  EXPECT_EQ(states[0]->size(), 8u);
  EXPECT_EQ(states[2]->size(), 24u * 8u);
  const std::vector<std::vector<StatePiece>> pieces = m.state_pieces(0);
  ASSERT_EQ(pieces.size(), 3u);
  EXPECT_EQ(pieces[2][0].name, "optim/muon/blocks.0.att_qkv/momentum");
  EXPECT_EQ(muon_state_specs(0, t)[0].count, 24u * 8u);
  // One step of a full-rank gradient moves each of q, k, v (8 x 8) by lr times an orthogonalized
  // matrix, of Frobenius norm about sqrt(8) (its singular values pushed toward [0.5, 1.5]).
  std::vector<float> w(t.numel, 0.0f), g(t.numel);
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-1, 1);
  for (float& x : g) x = u(rng);
  m.step_layer(0, w.data(), g.data(), 1.0f, 0.01, 1);
  for (int part = 0; part < 3; ++part) {
    double sq = 0;
    for (int i = 0; i < 64; ++i) sq += double(w[8 + part * 64 + i]) * w[8 + part * 64 + i];
    EXPECT_GT(std::sqrt(sq), 0.01 * 0.5 * std::sqrt(8.0)) << part;
    EXPECT_LT(std::sqrt(sq), 0.01 * 1.6 * std::sqrt(8.0)) << part;
  }
}

}  // namespace
}  // namespace asteria
