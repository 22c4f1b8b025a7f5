// Layer ops against hand-computed values: RoPE angles, causal masking, softmax cross-entropy,
// z-loss, the vectorizable exp, and the bf16 ops (storage rounding, linear on bf16 operands).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numbers>
#include <vector>

#include "core/bf16.hpp"
#include "core/cpu/gemm.hpp"
#include "core/cpu/gemm_routing.hpp"
#include "grad_check.hpp"
#include "model/ops/bf16_storage.hpp"
#include "model/ops/attention.hpp"
#include "model/ops/attention_cached.hpp"
#include "model/ops/attention_tiled.hpp"
#include "model/ops/cross_entropy.hpp"
#include "model/ops/fast_exp.hpp"
#include "model/ops/linear.hpp"
#include "model/ops/rope.hpp"

namespace asteria {
namespace {

TEST(RopeValues, RotatesPairsIAndIPlusHalf) {
  // head_dim 4: pairs (0, 2) with freq theta^0 = 1 and (1, 3) with freq theta^(-1/2).
  // theta = 4 / pi^2 makes the second frequency pi/2: at position 1 the pair (1, 3) turns by a
  // quarter turn, at position 2 by a half turn; the pair (0, 2) turns by 1 and 2 radians.
  const double pi = std::numbers::pi;
  const int T = 3, hd = 4;
  std::vector<double> cs(T * 2), sn(T * 2);
  ops::rope_tables(cs.data(), sn.data(), T, hd, 4.0 / (pi * pi));
  std::vector<double> x = {1, 2, 3, 4,  1, 2, 3, 4,  1, 2, 3, 4};  // positions 0, 1, 2
  ops::rope_forward(x.data(), hd, T, T, 1, hd, cs.data(), sn.data());
  const double expect[3][4] = {
      {1, 2, 3, 4},                                                          // position 0
      {std::cos(1.0) - 3 * std::sin(1.0), -4, 3 * std::cos(1.0) + std::sin(1.0), 2},
      {std::cos(2.0) - 3 * std::sin(2.0), -2, 3 * std::cos(2.0) + std::sin(2.0), -4}};
  for (int t = 0; t < T; t++)
    for (int i = 0; i < hd; i++) EXPECT_NEAR(x[t * hd + i], expect[t][i], 1e-12) << t << "," << i;
  // Backward rotates back: applying it to the rotated vectors restores the input.
  ops::rope_backward(x.data(), hd, T, T, 1, hd, cs.data(), sn.data());
  for (int t = 0; t < T; t++)
    for (int i = 0; i < hd; i++) EXPECT_NEAR(x[t * hd + i], i + 1.0, 1e-12);
}

TEST(RopeValues, PositionRestartsEachSequence) {
  // Row n has position n % seq_len: batch 2 of T 2 rotates rows 0 and 2 identically.
  const int T = 2, hd = 2;
  std::vector<double> cs(T), sn(T);
  ops::rope_tables(cs.data(), sn.data(), T, hd, 10000.0);
  std::vector<double> x = {1, 0, 1, 0, 1, 0, 1, 0};
  ops::rope_forward(x.data(), hd, 2 * T, T, 1, hd, cs.data(), sn.data());
  EXPECT_DOUBLE_EQ(x[0], 1.0);
  EXPECT_DOUBLE_EQ(x[4], 1.0);
  EXPECT_NEAR(x[2], std::cos(1.0), 1e-15);  // freq 1 for i = 0
  EXPECT_NEAR(x[3], std::sin(1.0), 1e-15);
  EXPECT_DOUBLE_EQ(x[6], x[2]);
  EXPECT_DOUBLE_EQ(x[7], x[3]);
}

template <class T>
void check_causal(int seq_len) {
  // Changing q, k, v at positions after t must leave the outputs at positions <= t unchanged.
  const int B = 2, C = 8, NH = 2;
  testing::TestRng rng(11);
  std::vector<T> qkv(static_cast<size_t>(B) * seq_len * 3 * C);
  for (auto& v : qkv) v = static_cast<T>(rng.uniform());
  std::vector<T> out1(B * seq_len * C), out2(B * seq_len * C),
      att(static_cast<size_t>(B) * NH * seq_len * seq_len);
  ops::attention_forward(out1.data(), att.data(), qkv.data(), B, seq_len, C, NH);
  const int t = seq_len / 2;
  for (int b = 0; b < B; b++)
    for (int s = t + 1; s < seq_len; s++)
      for (int c = 0; c < 3 * C; c++) qkv[(static_cast<size_t>(b) * seq_len + s) * 3 * C + c] += T(5);
  ops::attention_forward(out2.data(), att.data(), qkv.data(), B, seq_len, C, NH);
  int changed_after = 0;
  for (int b = 0; b < B; b++)
    for (int s = 0; s < seq_len; s++)
      for (int c = 0; c < C; c++) {
        const size_t i = (static_cast<size_t>(b) * seq_len + s) * C + c;
        if (s <= t) EXPECT_EQ(out1[i], out2[i]) << "b " << b << " s " << s;
        else changed_after += out1[i] != out2[i];
      }
  EXPECT_GT(changed_after, 0);  // the perturbation did reach the later positions
}

TEST(AttentionValues, CausalMaskSmall) { check_causal<float>(7); }
TEST(AttentionValues, CausalMaskAcrossRowBlocks) {
  check_causal<float>(2 * ops::kAttentionRowBlock + 5);
}

TEST(AttentionValues, FirstPositionCopiesItsValue) {
  // Position 0 attends only to itself: its output is its own v, whatever q and k are.
  const int B = 1, T = 4, C = 4, NH = 2;
  testing::TestRng rng(12);
  std::vector<double> qkv = rng.vec(B * T * 3 * C), out(B * T * C), att(B * NH * T * T);
  ops::attention_forward(out.data(), att.data(), qkv.data(), B, T, C, NH);
  for (int c = 0; c < C; c++) EXPECT_NEAR(out[c], qkv[2 * C + c], 1e-15);
  // Each probability row sums to 1 over the keys j <= t.
  for (int h = 0; h < NH; h++)
    for (int t = 0; t < T; t++) {
      double s = 0;
      for (int j = 0; j <= t; j++) s += att[(h * T + t) * T + j];
      EXPECT_NEAR(s, 1.0, 1e-14);
    }
}

// The tiled attention against the one that keeps the probabilities, in fp32 as trained: the same
// operations, but the vectorized row sums start at other alignments and dK / dV are summed one
// row block at a time, so the two agree within fp32 rounding, not bit for bit.
TEST(AttentionValues, TiledMatchesFull) {
  for (const int T : {7, 2 * ops::kAttentionRowBlock + 5}) {
    const int B = 2, C = 16, NH = 2, slabs = 2;
    testing::TestRng rng(13);
    std::vector<float> qkv(static_cast<size_t>(B) * T * 3 * C), dout(B * T * C);
    for (auto& v : qkv) v = static_cast<float>(2 * rng.uniform() - 1);
    for (auto& v : dout) v = static_cast<float>(2 * rng.uniform() - 1);
    std::vector<float> out_full(B * T * C), att(static_cast<size_t>(B) * NH * T * T),
        full_scratch(static_cast<size_t>(slabs) * T * T), dqkv_full(qkv.size());
    ops::attention_forward(out_full.data(), att.data(), qkv.data(), B, T, C, NH);
    ops::attention_backward(dqkv_full.data(), full_scratch.data(), slabs, dout.data(), qkv.data(),
                            att.data(), B, T, C, NH);
    std::vector<float> out_tiled(B * T * C), stats(static_cast<size_t>(B) * NH * 2 * T),
        scratch(slabs * ops::attention_tiled_scratch_per_thread(T)), dqkv_tiled(qkv.size());
    ops::attention_tiled_forward(out_tiled.data(), stats.data(), scratch.data(), slabs,
                                 qkv.data(), B, T, C, NH);
    ops::attention_tiled_backward(dqkv_tiled.data(), scratch.data(), slabs, dout.data(),
                                  qkv.data(), stats.data(), B, T, C, NH);
    double max_out = 0, max_abs = 0;
    for (float o : out_full) max_out = std::max(max_out, std::fabs(static_cast<double>(o)));
    for (size_t i = 0; i < out_full.size(); i++)
      ASSERT_NEAR(out_tiled[i], out_full[i], 1e-6 * max_out) << "T " << T << " output " << i;
    for (float g : dqkv_full) max_abs = std::max(max_abs, std::fabs(static_cast<double>(g)));
    for (size_t i = 0; i < dqkv_full.size(); i++)
      ASSERT_NEAR(dqkv_tiled[i], dqkv_full[i], 1e-5 * max_abs) << "T " << T << " dqkv " << i;
  }
}

TEST(AttentionValues, OverTheCacheMatchesFullAtTheNewPositions) {
  // A sequence's keys and values in the cache; the queries of positions pos .. T-1 give the full
  // attention's rows there, whatever pos (one new token, a pass of several, the whole prompt).
  const int T = 2 * ops::kAttentionRowBlock + 5, C = 16, NH = 2;
  testing::TestRng rng(17);
  std::vector<float> qkv(static_cast<size_t>(T) * 3 * C), out_full(static_cast<size_t>(T) * C),
      att(static_cast<size_t>(NH) * T * T), k(static_cast<size_t>(T) * C), v(k.size());
  for (auto& x : qkv) x = static_cast<float>(2 * rng.uniform() - 1);
  ops::attention_forward(out_full.data(), att.data(), qkv.data(), 1, T, C, NH);
  for (int t = 0; t < T; t++)
    for (int c = 0; c < C; c++) {
      k[static_cast<size_t>(t) * C + c] = qkv[static_cast<size_t>(t) * 3 * C + C + c];
      v[static_cast<size_t>(t) * C + c] = qkv[static_cast<size_t>(t) * 3 * C + 2 * C + c];
    }
  double max_out = 0;
  for (float o : out_full) max_out = std::max(max_out, std::fabs(static_cast<double>(o)));
  for (const int pos : {0, 1, T / 2, T - 1}) {
    const int n = T - pos;
    std::vector<float> out(static_cast<size_t>(n) * C), scores(static_cast<size_t>(n) * NH * T);
    ops::attention_cached_forward(out.data(), qkv.data() + static_cast<size_t>(pos) * 3 * C, 3 * C, k.data(), v.data(),
                                  n, pos, C, NH, scores.data());
    for (size_t i = 0; i < out.size(); i++)
      // The full attention's exponentials are ops/fast_exp.hpp's (relative error ~1e-7).
      ASSERT_NEAR(out[i], out_full[static_cast<size_t>(pos) * C + i], 1e-6 * max_out) << "pos " << pos << " element " << i;
  }
}

TEST(CrossEntropyValues, HandComputed) {
  // logits [0, ln 2, ln 3], target 2: softmax = [1, 2, 3] / 6, loss = ln 6 - ln 3 = ln 2.
  std::vector<double> logits = {0.0, std::log(2.0), std::log(3.0)};
  const int32_t target = 2;
  const auto r = ops::cross_entropy_fused(logits.data(), &target, 1, 3, 0.0);
  EXPECT_NEAR(r.ce, std::log(2.0), 1e-15);
  EXPECT_NEAR(r.z, std::log(6.0) * std::log(6.0), 1e-14);  // lse^2, reported even when off
  EXPECT_NEAR(logits[0], 1.0 / 6, 1e-15);
  EXPECT_NEAR(logits[1], 2.0 / 6, 1e-15);
  EXPECT_NEAR(logits[2], 3.0 / 6 - 1.0, 1e-15);
}

TEST(CrossEntropyValues, ZLossGradientAndMean) {
  // Two rows; the gradient is (p - onehot + 2 z lse p) / N and z is the mean of lse^2.
  const double z_loss = 0.25;
  std::vector<double> logits = {0.0, std::log(2.0), std::log(3.0), 0.0, 0.0, 0.0};
  const int32_t targets[2] = {2, 0};
  const auto r = ops::cross_entropy_fused(logits.data(), targets, 2, 3, z_loss);
  const double l1 = std::log(6.0), l2 = std::log(3.0);
  EXPECT_NEAR(r.ce, (std::log(2.0) + std::log(3.0)) / 2, 1e-15);
  EXPECT_NEAR(r.z, (l1 * l1 + l2 * l2) / 2, 1e-14);
  EXPECT_NEAR(logits[1], (2.0 / 6) * (1 + 2 * z_loss * l1) / 2, 1e-15);
  EXPECT_NEAR(logits[2], ((3.0 / 6) * (1 + 2 * z_loss * l1) - 1) / 2, 1e-15);
  EXPECT_NEAR(logits[3], ((1.0 / 3) * (1 + 2 * z_loss * l2) - 1) / 2, 1e-15);
}

TEST(CrossEntropyValues, FloatLargeLogitsStayFinite) {
  // Max subtraction keeps exp in range even for logits far beyond exp's float limit.
  std::vector<float> logits = {1000.f, 999.f, -1000.f};
  const int32_t target = 0;
  const auto r = ops::cross_entropy_fused(logits.data(), &target, 1, 3, 0.0);
  const double p1 = 1.0 / (1.0 + std::exp(1.0));  // softmax of the 999 entry
  EXPECT_NEAR(r.ce, -std::log(1.0 - p1), 1e-6);
  EXPECT_NEAR(logits[0], -p1, 1e-6);
  EXPECT_NEAR(logits[1], p1, 1e-6);
  EXPECT_NEAR(logits[2], 0.f, 1e-12);
}

TEST(FastExp, RelativeErrorOverTrainingRange) {
  double worst = 0;
  for (float x = -80.f; x <= 80.f; x += 0.01093f) {
    const double ref = std::exp(static_cast<double>(x));
    worst = std::max(worst, std::fabs(ops::fast_exp(x) - ref) / ref);
  }
  EXPECT_LT(worst, 3e-7);
  EXPECT_EQ(ops::fast_exp(0.0f), 1.0f);
  // Out of range it saturates like a float exp instead of producing garbage.
  EXPECT_EQ(ops::fast_exp(-1000.0f), 0.0f);
  EXPECT_EQ(ops::fast_exp(-90.0f), 0.0f);
  EXPECT_EQ(ops::fast_exp(1000.0f), INFINITY);
  EXPECT_EQ(ops::fast_exp(89.0f), INFINITY);
  EXPECT_TRUE(std::isnan(ops::fast_exp(NAN)));
}

}  // namespace
}  // namespace asteria

namespace asteria {
namespace {

// Round to nearest, ties to even, on values chosen by hand: 1 + 2^-8 is a tie between 1 and
// 1 + 2^-7 (goes to 1, even); 1 + 3 * 2^-8 ties up to 1 + 2^-6; just above a tie rounds up;
// 65535 rounds to 65536; infinities stay; NaN stays NaN; -0 stays -0.
TEST(Bf16Storage, RoundsToNearestEvenAndPacksAndWidensExactly) {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> x = {1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f, 1.0f + 0x1p-8f + 0x1p-20f, 65535.0f,
                                -2.5f, inf, -inf, -0.0f, std::nanf(""), 3.0e-39f};
  const std::vector<float> want = {1.0f, 1.0f + 0x1p-6f, 1.0f + 0x1p-7f, 65536.0f, -2.5f, inf, -inf, -0.0f};
  std::vector<uint16_t> packed(x.size());
  std::vector<float> widened(x.size()), rounded = x;
  ops::pack_bf16(packed.data(), x.data(), x.size());
  ops::unpack_bf16(widened.data(), packed.data(), x.size());
  ops::round_to_bf16(rounded.data(), rounded.data(), rounded.size());
  for (size_t i = 0; i < want.size(); i++) {
    EXPECT_EQ(widened[i], want[i]) << i;
    EXPECT_EQ(std::signbit(widened[i]), std::signbit(want[i])) << i;
  }
  EXPECT_TRUE(std::isnan(widened[8]));
  for (size_t i = 0; i < x.size(); i++) {
    EXPECT_EQ(packed[i], to_bf16(x[i]).bits) << i;   // the host type's rounding, which the GPU's matches
    EXPECT_EQ(std::memcmp(&rounded[i], &widened[i], sizeof(float)), 0) << i;   // round == pack + unpack
  }
  // Many values: parallel loops give the same bits as the scalar rounding.
  testing::TestRng rng(5);
  std::vector<float> big(1 << 16);
  for (float& v : big) v = static_cast<float>(rng.uniform() * 1e3);
  std::vector<float> big_rounded = big;
  ops::round_to_bf16(big_rounded.data(), big.data(), big.size());
  for (size_t i = 0; i < big.size(); i++) ASSERT_EQ(big_rounded[i], to_float(to_bf16(big[i]))) << i;
}

// The linear layer on bf16 operands equals the fp32 one given the operands rounded beforehand:
// bit for bit where it rounds them and runs the fp32 GEMMs (runtime.gemm openblas, or a CPU
// without bf16 kernels: the products of bf16 values are exact in fp32), and within fp32
// summation-order error on oneDNN's bf16 kernels; the weight's bf16 copy gives the same bits as
// rounding the weight.
void check_bf16_linear(bool bit_for_bit) {
  const int N = 37, IC = 72, OC = 45;
  testing::TestRng rng(3);
  auto fill = [&](size_t n) {
    std::vector<float> v(n);
    for (float& e : v) e = static_cast<float>(rng.uniform());
    return v;
  };
  const std::vector<float> x = fill(N * IC), w = fill(OC * IC), dy = fill(N * OC);
  auto rounded = [](std::vector<float> v) {
    for (float& e : v) e = to_float(to_bf16(e));
    return v;
  };
  auto expect_close = [&](const std::vector<float>& got, const std::vector<float>& want, int K, const char* what) {
    if (bit_for_bit) {
      EXPECT_EQ(got, want) << what;
      return;
    }
    for (size_t i = 0; i < got.size(); i++)   // |values| < 1: K products and the accumulator
      ASSERT_NEAR(got[i], want[i], (K + 2) * 2 * std::ldexp(1.0, -24) * (K + 1)) << what << " " << i;
  };
  for (const bool acc : {false, true}) {
    std::vector<float> y = fill(N * OC), dx = fill(N * IC), dw = fill(OC * IC);
    std::vector<float> y_ref = y, dx_ref = dx, dw_ref = dw;
    std::vector<float> y_copy = y, dx_copy = dx, dw_copy = dw;
    ops::linear_forward_bf16(y.data(), x.data(), w.data(), nullptr, N, IC, OC, acc);
    ops::linear_backward_bf16(dx.data(), dw.data(), dy.data(), x.data(), w.data(), nullptr, N, IC, OC, 0.5f, acc);
    ops::linear_forward(y_ref.data(), rounded(x).data(), rounded(w).data(), N, IC, OC, acc);
    ops::linear_backward(dx_ref.data(), dw_ref.data(), rounded(dy).data(), rounded(x).data(), rounded(w).data(), N,
                         IC, OC, 0.5f, acc);
    expect_close(y, y_ref, IC, "y");
    expect_close(dx, dx_ref, OC, "dx");
    expect_close(dw, dw_ref, N, "dw");
    // The weight's bf16 copy made beforehand (the model's, once per step) gives the same bits.
    std::vector<uint16_t> w_bf16(w.size());
    ops::pack_bf16(w_bf16.data(), w.data(), w.size());
    ops::linear_forward_bf16(y_copy.data(), x.data(), w.data(), w_bf16.data(), N, IC, OC, acc);
    ops::linear_backward_bf16(dx_copy.data(), dw_copy.data(), dy.data(), x.data(), w.data(), w_bf16.data(), N, IC, OC,
                              0.5f, acc);
    EXPECT_EQ(y_copy, y);
    EXPECT_EQ(dx_copy, dx);
    EXPECT_EQ(dw_copy, dw);
  }
  std::vector<float> y_bf16(N * OC), y_fp32(N * OC);   // and the rounding is applied
  ops::linear_forward_bf16(y_bf16.data(), x.data(), w.data(), nullptr, N, IC, OC, false);
  ops::linear_forward(y_fp32.data(), x.data(), w.data(), N, IC, OC, false);
  EXPECT_NE(y_bf16, y_fp32);
}

TEST(Bf16Linear, EqualsFp32LinearOnRoundedOperands) {
  check_bf16_linear(!cpu::bf16_gemm_available());   // the default routing: oneDNN's kernels where there are some
  set_gemm_choice(GemmChoice::OpenBlas);            // the rounded operands' path
  check_bf16_linear(true);
  set_gemm_choice(GemmChoice::Auto);
}

}  // namespace
}  // namespace asteria
