// Finite-difference checks (fp64) of every layer op's hand-written backward. Each test takes a
// random linear functional of the op's output, L = sum(out * R), so dL/dout = R, and compares
// the op's backward against central differences of L.
#include <gtest/gtest.h>

#include <vector>

#include "grad_check.hpp"
#include "model/ops/attention.hpp"
#include "model/ops/attention_tiled.hpp"
#include "model/ops/cross_entropy.hpp"
#include "model/ops/embedding.hpp"
#include "model/ops/layernorm.hpp"
#include "model/ops/linear.hpp"
#include "model/ops/rmsnorm.hpp"
#include "model/ops/rope.hpp"
#include "model/ops/swiglu.hpp"

namespace asteria {
namespace {

using testing::dot;
using testing::max_gradient_error;
using testing::TestRng;
using Vec = std::vector<double>;

constexpr double kTol = 1e-6;

TEST(OpsGrad, Embedding) {
  const int E = 7, C = 5, N = 6;
  TestRng rng(1);
  Vec wte = rng.vec(E * C), R = rng.vec(N * C);
  const std::vector<int32_t> tokens = {3, 0, 3, 6, 1, 3};  // repeats must accumulate
  Vec out(N * C);
  auto f = [&] {
    ops::embedding_forward(out.data(), tokens.data(), wte.data(), N, C);
    return dot(out, R);
  };
  Vec dwte(E * C, 0.0);
  ops::embedding_backward(dwte.data(), tokens.data(), R.data(), N, C, 2.0);  // scale 2
  for (auto& g : dwte) g /= 2.0;
  EXPECT_LT(max_gradient_error(f, wte.data(), dwte.data(), wte.size()), kTol);
}

TEST(OpsGrad, Linear) {
  const int N = 5, IC = 4, OC = 3;
  TestRng rng(2);
  Vec inp = rng.vec(N * IC), w = rng.vec(OC * IC), R = rng.vec(N * OC), out(N * OC);
  auto f = [&] {
    ops::linear_forward(out.data(), inp.data(), w.data(), N, IC, OC, false);
    return dot(out, R);
  };
  Vec dinp(N * IC, 0.0), dw(OC * IC, 0.0);
  ops::linear_backward(dinp.data(), dw.data(), R.data(), inp.data(), w.data(), N, IC, OC, 1.0,
                       false);
  EXPECT_LT(max_gradient_error(f, inp.data(), dinp.data(), inp.size()), kTol);
  EXPECT_LT(max_gradient_error(f, w.data(), dw.data(), w.size()), kTol);

  // Accumulating forms: out += ..., dinp += ..., dweight += scale * ...
  Vec out2(N * OC, 1.0);
  ops::linear_forward(out2.data(), inp.data(), w.data(), N, IC, OC, true);
  f();
  for (int i = 0; i < N * OC; i++) EXPECT_NEAR(out2[i], out[i] + 1.0, 1e-12);
  Vec dinp2(N * IC, 1.0), dw2 = dw;
  ops::linear_backward(dinp2.data(), dw2.data(), R.data(), inp.data(), w.data(), N, IC, OC, 0.5,
                       true);
  for (int i = 0; i < N * IC; i++) EXPECT_NEAR(dinp2[i], dinp[i] + 1.0, 1e-12);
  for (int i = 0; i < OC * IC; i++) EXPECT_NEAR(dw2[i], 1.5 * dw[i], 1e-12);
}

TEST(OpsGrad, LayerNormWithResidual) {
  const int N = 4, C = 6;
  TestRng rng(3);
  Vec inp = rng.vec(N * C, 2.0), res = rng.vec(N * C), R = rng.vec(N * C);
  for (int i = 0; i < N * C; i++) inp[i] += 0.5;  // nonzero mean
  Vec out(N * C), mean(N), rstd(N);
  auto f = [&] {
    ops::layernorm_forward(out.data(), mean.data(), rstd.data(), inp.data(), res.data(), N, C,
                           1e-5);
    return dot(out, R);
  };
  f();
  Vec dinp(N * C, 0.0);
  ops::layernorm_backward(dinp.data(), R.data(), inp.data(), mean.data(), rstd.data(), N, C,
                          false);
  EXPECT_LT(max_gradient_error(f, inp.data(), dinp.data(), inp.size()), kTol);
  // The residual passes through unchanged: out - res is the plain normalization.
  f();  // out of the unperturbed input (the check above leaves the last perturbed one)
  Vec plain(N * C);
  ops::layernorm_forward(plain.data(), mean.data(), rstd.data(), inp.data(),
                         static_cast<const double*>(nullptr), N, C, 1e-5);
  for (int i = 0; i < N * C; i++) EXPECT_NEAR(out[i] - res[i], plain[i], 1e-12);
  // accumulate = true adds.
  Vec acc(N * C, 3.0);
  ops::layernorm_backward(acc.data(), R.data(), inp.data(), mean.data(), rstd.data(), N, C, true);
  for (int i = 0; i < N * C; i++) EXPECT_NEAR(acc[i], dinp[i] + 3.0, 1e-12);
}

TEST(OpsGrad, RMSNormStridedWithWeight) {
  // Rows of C = 5 inside rows of 3C (as QK-norm sees the q part of a fused qkv buffer).
  const int N = 4, C = 5, ld = 3 * C;
  TestRng rng(4);
  Vec inp = rng.vec(N * ld, 2.0), w = rng.vec(C), R = rng.vec(N * ld);
  for (auto& x : w) x += 1.0;
  Vec out(N * ld, 0.0), rstd(N);
  auto f = [&] {
    ops::rmsnorm_forward(out.data() + C, ld, rstd.data(), inp.data() + C, ld, w.data(),
                         static_cast<const double*>(nullptr), N, C, 1e-6);
    double s = 0;
    for (int n = 0; n < N; n++)
      for (int c = 0; c < C; c++) s += out[n * ld + C + c] * R[n * ld + C + c];
    return s;
  };
  f();
  Vec dinp(N * ld, 0.0), dw(C, 0.0);
  ops::rmsnorm_backward(dinp.data() + C, ld, dw.data(), R.data() + C, ld, inp.data() + C, ld,
                        w.data(), rstd.data(), N, C, 1.0, false);
  EXPECT_LT(max_gradient_error(f, inp.data(), dinp.data(), inp.size()), kTol);
  EXPECT_LT(max_gradient_error(f, w.data(), dw.data(), w.size()), kTol);
  // In place (dinp aliasing dout) gives the same dinp; dweight accumulates with its scale.
  Vec inplace = R, dw2 = dw;
  ops::rmsnorm_backward(inplace.data() + C, ld, dw2.data(), inplace.data() + C, ld,
                        inp.data() + C, ld, w.data(), rstd.data(), N, C, 0.5, false);
  for (int n = 0; n < N; n++)
    for (int c = 0; c < C; c++) EXPECT_NEAR(inplace[n * ld + C + c], dinp[n * ld + C + c], 1e-12);
  for (int c = 0; c < C; c++) EXPECT_NEAR(dw2[c], 1.5 * dw[c], 1e-12);
}

TEST(OpsGrad, RMSNormResidualAndAccumulate) {
  const int N = 3, C = 4;
  TestRng rng(5);
  Vec inp = rng.vec(N * C), w = rng.vec(C), res = rng.vec(N * C), R = rng.vec(N * C);
  Vec out(N * C), rstd(N);
  auto f = [&] {
    ops::rmsnorm_forward(out.data(), C, rstd.data(), inp.data(), C, w.data(), res.data(), N, C,
                         1e-5);
    return dot(out, R);
  };
  f();
  Vec dinp(N * C, 2.0), dw(C, 0.0);
  ops::rmsnorm_backward(dinp.data(), C, dw.data(), R.data(), C, inp.data(), C, w.data(),
                        rstd.data(), N, C, 1.0, true);
  for (auto& g : dinp) g -= 2.0;  // accumulate = true added to the 2s
  EXPECT_LT(max_gradient_error(f, inp.data(), dinp.data(), inp.size()), kTol);
  EXPECT_LT(max_gradient_error(f, w.data(), dw.data(), w.size()), kTol);
}

TEST(OpsGrad, Rope) {
  const int B = 2, T = 3, hd = 4, heads = 2, ld = heads * hd + 3;  // padding after the heads
  TestRng rng(6);
  Vec cs(T * hd / 2), sn(T * hd / 2);
  ops::rope_tables(cs.data(), sn.data(), T, hd, 10.0);
  Vec x = rng.vec(B * T * ld), R = rng.vec(B * T * ld), y;
  auto f = [&] {
    y = x;
    ops::rope_forward(y.data(), ld, B * T, T, heads, hd, cs.data(), sn.data());
    return dot(y, R);
  };
  Vec dx = R;
  ops::rope_backward(dx.data(), ld, B * T, T, heads, hd, cs.data(), sn.data());
  EXPECT_LT(max_gradient_error(f, x.data(), dx.data(), x.size()), kTol);
  // Columns after the heads are untouched.
  f();
  for (int n = 0; n < B * T; n++)
    for (int c = heads * hd; c < ld; c++) EXPECT_EQ(y[n * ld + c], x[n * ld + c]);
}

void check_attention(int B, int T, int C, int NH, size_t max_checks, uint64_t seed) {
  TestRng rng(seed);
  Vec qkv = rng.vec(static_cast<size_t>(B) * T * 3 * C, 1.5), R = rng.vec(B * T * C);
  Vec out(B * T * C), att(static_cast<size_t>(B) * NH * T * T);
  auto f = [&] {
    ops::attention_forward(out.data(), att.data(), qkv.data(), B, T, C, NH);
    return dot(out, R);
  };
  f();
  const int slabs = 3;
  Vec dqkv(qkv.size(), 7.0), scratch(static_cast<size_t>(slabs) * T * T);
  ops::attention_backward(dqkv.data(), scratch.data(), slabs, R.data(), qkv.data(), att.data(), B,
                          T, C, NH);
  EXPECT_LT(max_gradient_error(f, qkv.data(), dqkv.data(), qkv.size(), max_checks), kTol);
}

TEST(OpsGrad, AttentionSmall) { check_attention(2, 5, 8, 2, 1u << 30, 7); }

TEST(OpsGrad, AttentionAcrossRowBlocks) {
  // T > kAttentionRowBlock exercises the blocked causal path (off-diagonal and ragged blocks).
  static_assert(ops::kAttentionRowBlock < 150);
  check_attention(1, ops::kAttentionRowBlock + 13, 8, 2, 600, 8);
}

// The tiled attention (no T x T kept): its backward recomputes the probabilities from the
// saved row statistics; checked the same way, in fp64.
void check_attention_tiled(int B, int T, int C, int NH, size_t max_checks, uint64_t seed) {
  TestRng rng(seed);
  const int slabs = 3;
  Vec qkv = rng.vec(static_cast<size_t>(B) * T * 3 * C, 1.5), R = rng.vec(B * T * C);
  Vec out(B * T * C), stats(static_cast<size_t>(B) * NH * 2 * T),
      scratch(slabs * ops::attention_tiled_scratch_per_thread(T));
  auto f = [&] {
    ops::attention_tiled_forward(out.data(), stats.data(), scratch.data(), slabs, qkv.data(), B,
                                 T, C, NH);
    return dot(out, R);
  };
  f();
  Vec dqkv(qkv.size(), 7.0);
  ops::attention_tiled_backward(dqkv.data(), scratch.data(), slabs, R.data(), qkv.data(),
                                stats.data(), B, T, C, NH);
  EXPECT_LT(max_gradient_error(f, qkv.data(), dqkv.data(), qkv.size(), max_checks), kTol);
}

TEST(OpsGrad, AttentionTiledSmall) { check_attention_tiled(2, 5, 8, 2, 1u << 30, 7); }

TEST(OpsGrad, AttentionTiledAcrossRowBlocks) {
  check_attention_tiled(1, 2 * ops::kAttentionRowBlock + 13, 8, 2, 600, 8);
}

TEST(OpsGrad, SwiGLU) {
  const int N = 3, F = 5;
  TestRng rng(9);
  Vec inp = rng.vec(N * 2 * F, 3.0), R = rng.vec(N * F), out(N * F);
  auto f = [&] {
    ops::swiglu_forward(out.data(), inp.data(), N, F);
    return dot(out, R);
  };
  Vec dinp(N * 2 * F);
  ops::swiglu_backward(dinp.data(), R.data(), inp.data(), N, F);
  EXPECT_LT(max_gradient_error(f, inp.data(), dinp.data(), inp.size()), kTol);
}

TEST(OpsGrad, CrossEntropyWithZLoss) {
  const int N = 4, V = 7;
  TestRng rng(10);
  Vec logits = rng.vec(N * V, 3.0);
  const std::vector<int32_t> targets = {0, 6, 3, 3};
  for (double z_loss : {0.0, 0.1}) {
    auto f = [&] {
      Vec tmp = logits;
      const auto r = ops::cross_entropy_fused(tmp.data(), targets.data(), N, V, z_loss);
      return r.ce + z_loss * r.z;
    };
    Vec grad = logits;
    ops::cross_entropy_fused(grad.data(), targets.data(), N, V, z_loss);
    EXPECT_LT(max_gradient_error(f, logits.data(), grad.data(), logits.size()), kTol)
        << "z_loss " << z_loss;
  }
}

}  // namespace
}  // namespace asteria
