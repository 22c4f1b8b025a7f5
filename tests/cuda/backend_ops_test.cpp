// Every model op on the CUDA backend against the CPU backend's (ggml's test-backend-ops): the
// same random inputs through ops::X (host) and ops::cuda::X (device), forward and backward,
// across shapes that cross the kernels' tile and warp sizes. fp32 on both sides, so the bound
// is fp32 rounding: the norm-wise relative error ||gpu - cpu|| / ||cpu|| <= 1e-5 (elementwise
// relative error is meaningless where a sum cancels to near 0; the norm bound is what a
// training step sees). Without a device every test is skipped and says why (ctest: skipped).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/backend.hpp"
#include "device_fixture.hpp"
#include "core/bf16.hpp"
#include "core/cuda/cublaslt_gemm.hpp"
#include "core/cuda/cuda_context.hpp"
#include "model/ops/attention.hpp"
#include "model/ops/attention_cached.hpp"
#include "model/ops/attention_tiled.hpp"
#include "model/ops/cross_entropy.hpp"
#include "model/ops/embedding.hpp"
#include "model/ops/layernorm.hpp"
#include "model/ops/bf16_storage.hpp"
#include "model/ops/linear.hpp"
#include "model/ops/rmsnorm.hpp"
#include "model/ops/rope.hpp"
#include "model/ops/swiglu.hpp"
#include "optim/adamw_update.hpp"

namespace asteria {
namespace {

constexpr double kFp32Tolerance = 1e-5;

using testing::OnDevice;
using testing::random_vector;

void expect_close(const std::vector<float>& gpu, const std::vector<float>& cpu, const std::string& what,
                  double tolerance = kFp32Tolerance) {
  ASSERT_EQ(gpu.size(), cpu.size()) << what;
  double diff = 0, norm = 0;
  for (size_t i = 0; i < cpu.size(); ++i) {
    ASSERT_TRUE(std::isfinite(gpu[i])) << what << " at " << i;
    diff += (double(gpu[i]) - cpu[i]) * (double(gpu[i]) - cpu[i]);
    norm += double(cpu[i]) * cpu[i];
  }
  EXPECT_LE(std::sqrt(diff), tolerance * std::sqrt(norm) + 1e-30) << what << ": relative error "
                                                                    << std::sqrt(diff / std::max(norm, 1e-300));
}

using Ops = OnDevice;

TEST_F(Ops, Linear) {
  for (auto [N, IC, OC] : {std::tuple{1, 1, 1}, {37, 64, 96}, {130, 256, 192}}) {
    const auto x = random_vector(size_t(N) * IC, 1), w = random_vector(size_t(OC) * IC, 2);
    const auto dy = random_vector(size_t(N) * OC, 3), y0 = random_vector(size_t(N) * OC, 4);
    const auto dw0 = random_vector(size_t(OC) * IC, 5), dx0 = random_vector(size_t(N) * IC, 6);
    for (bool acc : {false, true}) {
      std::vector<float> y = y0, dx = dx0, dw = dw0;
      float *d_y = up(y0), *d_dx = up(dx0), *d_dw = up(dw0);
      ops::linear_forward(y.data(), x.data(), w.data(), N, IC, OC, acc);
      ops::cuda::linear_forward(d_y, up(x), up(w), N, IC, OC, acc);
      ops::linear_backward(dx.data(), dw.data(), dy.data(), x.data(), w.data(), N, IC, OC, 0.5f, acc);
      ops::cuda::linear_backward(d_dx, d_dw, up(dy), up(x), up(w), N, IC, OC, 0.5f, acc);
      const std::string at = " N " + std::to_string(N) + " accumulate " + std::to_string(acc);
      expect_close(down(d_y, y.size()), y, "linear forward" + at);
      expect_close(down(d_dx, dx.size()), dx, "linear dinp" + at);
      expect_close(down(d_dw, dw.size()), dw, "linear dweight" + at);
    }
  }
}

// bf16 operands (runtime.precision bf16): against the CPU op run on the same operands rounded to
// bf16 on the host, so the products agree exactly and only fp32 accumulation order differs:
// the fp32 bound holds.
TEST_F(Ops, LinearBf16) {
  auto rounded = [](std::vector<float> v) {
    for (float& x : v) x = to_float(to_bf16(x));
    return v;
  };
  for (auto [N, IC, OC] : {std::tuple{1, 1, 1}, {37, 64, 96}, {130, 256, 192}}) {
    const auto x = random_vector(size_t(N) * IC, 11), w = random_vector(size_t(OC) * IC, 12);
    const auto dy = random_vector(size_t(N) * OC, 13), y0 = random_vector(size_t(N) * OC, 14);
    const auto dw0 = random_vector(size_t(OC) * IC, 15), dx0 = random_vector(size_t(N) * IC, 16);
    const auto xr = rounded(x), wr = rounded(w), dyr = rounded(dy);
    for (bool acc : {false, true}) {
      std::vector<float> y = y0, dx = dx0, dw = dw0;
      float *d_y = up(y0), *d_dx = up(dx0), *d_dw = up(dw0);
      ops::linear_forward(y.data(), xr.data(), wr.data(), N, IC, OC, acc);
      ops::cuda::linear_forward_bf16(d_y, up(x), up(w), nullptr, N, IC, OC, acc);
      ops::linear_backward(dx.data(), dw.data(), dyr.data(), xr.data(), wr.data(), N, IC, OC, 0.5f, acc);
      ops::cuda::linear_backward_bf16(d_dx, d_dw, up(dy), up(x), up(w), nullptr, N, IC, OC, 0.5f, acc);
      const std::string at = " N " + std::to_string(N) + " accumulate " + std::to_string(acc);
      expect_close(down(d_y, y.size()), y, "linear bf16 forward" + at);
      expect_close(down(d_dx, dx.size()), dx, "linear bf16 dinp" + at);
      expect_close(down(d_dw, dw.size()), dw, "linear bf16 dweight" + at);
      // The weight's bf16 copy made beforehand (the model's, once per step): the same bits as
      // rounding it in the op.
      std::vector<uint16_t> w_bf16(w.size());
      ops::pack_bf16(w_bf16.data(), w.data(), w.size());
      float *d_y2 = up(y0), *d_dx2 = up(dx0), *d_dw2 = up(dw0);
      ops::cuda::linear_forward_bf16(d_y2, up(x), up(w), up(w_bf16), N, IC, OC, acc);
      ops::cuda::linear_backward_bf16(d_dx2, d_dw2, up(dy), up(x), up(w), up(w_bf16), N, IC, OC, 0.5f, acc);
      EXPECT_EQ(down(d_y2, y.size()), down(d_y, y.size())) << "forward with the weight's copy" << at;
      EXPECT_EQ(down(d_dx2, dx.size()), down(d_dx, dx.size())) << "dinp with the weight's copy" << at;
      EXPECT_EQ(down(d_dw2, dw.size()), down(d_dw, dw.size())) << "dweight with the weight's copy" << at;
    }
  }
}

TEST_F(Ops, LayerNorm) {
  for (auto [N, C] : {std::pair{1, 1}, {5, 33}, {64, 256}, {17, 2048}}) {
    const auto x = random_vector(size_t(N) * C, 7, -2, 3), r = random_vector(size_t(N) * C, 8);
    const auto dy = random_vector(size_t(N) * C, 9), dx0 = random_vector(size_t(N) * C, 10);
    for (bool with_residual : {false, true}) {
      std::vector<float> y(x.size()), mean(N), rstd(N), dx = dx0;
      float *d_y = up(y), *d_mean = up(mean), *d_rstd = up(rstd), *d_x = up(x);
      ops::layernorm_forward(y.data(), mean.data(), rstd.data(), x.data(), with_residual ? r.data() : nullptr, N, C, 1e-5);
      ops::cuda::layernorm_forward(d_y, d_mean, d_rstd, d_x, with_residual ? up(r) : nullptr, N, C, 1e-5);
      expect_close(down(d_y, y.size()), y, "layernorm forward");
      expect_close(down(d_rstd, N), rstd, "layernorm rstd");
      float* d_dx = up(dx0);
      ops::layernorm_backward(dx.data(), dy.data(), x.data(), mean.data(), rstd.data(), N, C, with_residual);
      ops::cuda::layernorm_backward(d_dx, up(dy), d_x, d_mean, d_rstd, N, C, with_residual);
      expect_close(down(d_dx, dx.size()), dx, "layernorm backward C " + std::to_string(C));
    }
  }
}

TEST_F(Ops, RmsNormWithStridesAsQkNormUsesThem) {
  // QK-norm runs over the q columns of a fused [N, 3C] row: ld 3C, C columns.
  for (auto [N, C, ld] : {std::tuple{3, 1, 1}, {40, 64, 192}, {9, 2048, 2048}}) {
    const auto x = random_vector(size_t(N) * ld, 11, -2, 2), w = random_vector(C, 12, 0.5f, 1.5f);
    const auto r = random_vector(size_t(N) * ld, 13), dy = random_vector(size_t(N) * ld, 14);
    const auto dw0 = random_vector(C, 15);
    for (bool acc : {false, true}) {
      std::vector<float> y = r, rstd(N), dx = x, dw = dw0;   // out starts as anything; dx accumulates onto x's values
      float *d_y = up(y), *d_rstd = up(rstd), *d_x = up(x), *d_w = up(w);
      ops::rmsnorm_forward(y.data(), ld, rstd.data(), x.data(), ld, w.data(), acc ? r.data() : nullptr, N, C, 1e-6);
      ops::cuda::rmsnorm_forward(d_y, ld, d_rstd, d_x, ld, d_w, acc ? up(r) : nullptr, N, C, 1e-6);
      expect_close(down(d_y, y.size()), y, "rmsnorm forward");
      float *d_dx = up(dx), *d_dw = up(dw0);
      ops::rmsnorm_backward(dx.data(), ld, dw.data(), dy.data(), ld, x.data(), ld, w.data(), rstd.data(), N, C, 0.25f, acc);
      ops::cuda::rmsnorm_backward(d_dx, ld, d_dw, up(dy), ld, d_x, ld, d_w, d_rstd, N, C, 0.25f, acc);
      expect_close(down(d_dx, dx.size()), dx, "rmsnorm dinp C " + std::to_string(C));
      expect_close(down(d_dw, C), dw, "rmsnorm dweight C " + std::to_string(C));
    }
  }
}

TEST_F(Ops, RopeOnTheQAndKHeadsOfAFusedRow) {
  const int B = 2, T = 33, NH = 4, hd = 16, C = NH * hd, ld = 3 * C, N = B * T;
  std::vector<float> cs(T * hd / 2), sn(T * hd / 2);
  ops::rope_tables(cs.data(), sn.data(), T, hd, 10000.0);
  std::vector<float> x = random_vector(size_t(N) * ld, 16);
  float *d_x = up(x), *d_cs = up(cs), *d_sn = up(sn);
  ops::rope_forward(x.data(), ld, N, T, 2 * NH, hd, cs.data(), sn.data());
  ops::cuda::rope_forward(d_x, ld, N, T, 2 * NH, hd, d_cs, d_sn);
  expect_close(down(d_x, x.size()), x, "rope forward");
  ops::rope_backward(x.data(), ld, N, T, 2 * NH, hd, cs.data(), sn.data());
  ops::cuda::rope_backward(d_x, ld, N, T, 2 * NH, hd, d_cs, d_sn);
  expect_close(down(d_x, x.size()), x, "rope backward");
}

TEST_F(Ops, SwiGlu) {
  for (auto [N, F] : {std::pair{1, 1}, {31, 96}, {64, 1024}}) {
    const auto x = random_vector(size_t(N) * 2 * F, 17, -4, 4), dy = random_vector(size_t(N) * F, 18);
    std::vector<float> y(size_t(N) * F), dx(x.size());
    float *d_x = up(x), *d_y = up(y), *d_dx = up(dx);
    ops::swiglu_forward(y.data(), x.data(), N, F);
    ops::cuda::swiglu_forward(d_y, d_x, N, F);
    expect_close(down(d_y, y.size()), y, "swiglu forward");
    ops::swiglu_backward(dx.data(), dy.data(), x.data(), N, F);
    ops::cuda::swiglu_backward(d_dx, up(dy), d_x, N, F);
    expect_close(down(d_dx, dx.size()), dx, "swiglu backward");
  }
}

TEST_F(Ops, EmbeddingWithRepeatedTokens) {
  const int E = 50, C = 200, N = 300;
  std::vector<int32_t> tokens(N);
  for (int n = 0; n < N; ++n) tokens[n] = (n * 7) % 13;   // few distinct tokens: many repeats
  const auto wte = random_vector(size_t(E) * C, 19), dy = random_vector(size_t(N) * C, 20);
  std::vector<float> y(size_t(N) * C), dwte = random_vector(size_t(E) * C, 21);
  float *d_y = up(y), *d_dwte = up(dwte);
  int32_t* d_tokens = up(tokens);
  ops::embedding_forward(y.data(), tokens.data(), wte.data(), N, C);
  ops::cuda::embedding_forward(d_y, d_tokens, up(wte), N, C);
  expect_close(down(d_y, y.size()), y, "embedding forward");
  ops::embedding_backward(dwte.data(), tokens.data(), dy.data(), N, C, 0.5f);
  ops::cuda::embedding_backward(d_dwte, d_tokens, up(dy), N, C, 0.5f);
  expect_close(down(d_dwte, dwte.size()), dwte, "embedding backward");
}

TEST_F(Ops, CrossEntropyWithZLossInChunks) {
  const int N = 37, V = 1000;
  std::vector<int32_t> targets(N);
  for (int n = 0; n < N; ++n) targets[n] = (n * 131) % V;
  const auto logits = random_vector(size_t(N) * V, 22, -8, 8);
  // Two chunks of rows with the means over all N, as the chunked LM head calls it.
  for (int chunk : {N, 16}) {
    std::vector<float> cpu = logits;
    float* d_logits = up(logits);
    int32_t* d_targets = up(targets);
    double ce_cpu = 0, z_cpu = 0, ce_gpu = 0, z_gpu = 0;
    for (int n0 = 0; n0 < N; n0 += chunk) {
      const int rows = std::min(chunk, N - n0);
      const auto a = ops::cross_entropy_fused(cpu.data() + size_t(n0) * V, targets.data() + n0, rows, V, 1e-4, N);
      const auto b = ops::cuda::cross_entropy_fused(d_logits + size_t(n0) * V, d_targets + n0, rows, V, 1e-4, N);
      ce_cpu += a.ce, z_cpu += a.z, ce_gpu += b.ce, z_gpu += b.z;
    }
    EXPECT_NEAR(ce_gpu, ce_cpu, kFp32Tolerance * ce_cpu) << "chunk " << chunk;
    EXPECT_NEAR(z_gpu, z_cpu, kFp32Tolerance * z_cpu) << "chunk " << chunk;
    expect_close(down(d_logits, cpu.size()), cpu, "cross-entropy gradient, chunk " + std::to_string(chunk));
  }
}

TEST_F(Ops, AttentionReference) {
  // T crosses the CPU kernel's 64-row blocks; the scratch holds fewer heads than NH, so the CUDA
  // backward runs its heads in groups.
  for (auto [B, T, NH, hd] : {std::tuple{1, 1, 1, 4}, {2, 70, 4, 16}, {1, 129, 2, 64}}) {
    const int C = NH * hd;
    const auto qkv = random_vector(size_t(B) * T * 3 * C, 23, -2, 2), dy = random_vector(size_t(B) * T * C, 24);
    std::vector<float> out(size_t(B) * T * C), att(size_t(B) * NH * T * T), dqkv(qkv.size());
    const int n_scratch = std::max(1, NH / 2);
    std::vector<float> scratch(size_t(std::max(n_scratch, 1)) * T * T);
    float *d_qkv = up(qkv), *d_out = up(out), *d_att = up(att), *d_dqkv = up(dqkv), *d_scratch = up(scratch);
    ops::attention_forward(out.data(), att.data(), qkv.data(), B, T, C, NH);
    ops::cuda::attention_forward(d_out, d_att, d_qkv, B, T, C, NH);
    const std::string at = " B " + std::to_string(B) + " T " + std::to_string(T) + " NH " + std::to_string(NH);
    expect_close(down(d_out, out.size()), out, "attention forward" + at);
    ops::attention_backward(dqkv.data(), scratch.data(), n_scratch, dy.data(), qkv.data(), att.data(), B, T, C, NH);
    ops::cuda::attention_backward(d_dqkv, d_scratch, n_scratch, up(dy), d_qkv, d_att, B, T, C, NH);
    expect_close(down(d_dqkv, dqkv.size()), dqkv, "attention backward" + at);
  }
}

TEST_F(Ops, AttentionTiledKeepsNoTByTMatrix) {
  // The flash kernels against the CPU's tiled kernels: out, the row statistics, dqkv. T crosses
  // the 64-row blocks and 32-row tiles; every head size the CUDA kernels have.
  for (auto [B, T, NH, hd] : {std::tuple{1, 1, 1, 16}, {2, 70, 4, 16}, {1, 129, 2, 32}, {2, 97, 2, 64}, {1, 100, 2, 128}}) {
    const int C = NH * hd;
    const auto qkv = random_vector(size_t(B) * T * 3 * C, 28, -2, 2), dy = random_vector(size_t(B) * T * C, 29);
    std::vector<float> out(size_t(B) * T * C), stats(size_t(B) * NH * 2 * T), dqkv(qkv.size());
    std::vector<float> scratch(ops::attention_tiled_scratch_per_thread(T));
    float *d_qkv = up(qkv), *d_out = up(out), *d_stats = up(stats), *d_dqkv = up(dqkv);
    ops::attention_tiled_forward(out.data(), stats.data(), scratch.data(), 1, qkv.data(), B, T, C, NH);
    ops::cuda::attention_tiled_forward(d_out, d_stats, static_cast<float*>(nullptr), 0, d_qkv, B, T, C, NH);
    const std::string at = " B " + std::to_string(B) + " T " + std::to_string(T) + " hd " + std::to_string(hd);
    expect_close(down(d_out, out.size()), out, "tiled attention forward" + at);
    expect_close(down(d_stats, stats.size()), stats, "tiled attention statistics" + at);
    ops::attention_tiled_backward(dqkv.data(), scratch.data(), 1, dy.data(), qkv.data(), stats.data(), B, T, C, NH);
    ops::cuda::attention_tiled_backward(d_dqkv, static_cast<float*>(nullptr), 0, up(dy), d_qkv, d_stats, B, T, C, NH);
    expect_close(down(d_dqkv, dqkv.size()), dqkv, "tiled attention backward" + at);
  }
}

TEST_F(Ops, AttentionOverTheCache) {
  // Generation's attention: n new queries at positions pos .. pos+n-1 over pos+n cached keys and
  // values; one token, a pass of several, across the kernel's 128 threads and head sizes.
  for (auto [pos, n, NH, hd] : {std::tuple{0, 1, 1, 16}, {9, 1, 4, 16}, {0, 37, 2, 64}, {200, 3, 2, 128}, {150, 1, 16, 64}}) {
    const int C = NH * hd, keys = pos + n;
    const auto q = random_vector(size_t(n) * 3 * C, 31, -2, 2), k = random_vector(size_t(keys) * C, 32, -2, 2),
               v = random_vector(size_t(keys) * C, 33);
    std::vector<float> out(size_t(n) * C), scores(size_t(n) * NH * keys);
    ops::attention_cached_forward(out.data(), q.data(), 3 * C, k.data(), v.data(), n, pos, C, NH, scores.data());
    float* d_out = up(out);
    ops::cuda::attention_cached_forward(d_out, static_cast<const float*>(up(q)), 3 * C, static_cast<const float*>(up(k)),
                                        static_cast<const float*>(up(v)), n, pos, C, NH, static_cast<float*>(nullptr));
    expect_close(down(d_out, out.size()), out,
                 "attention over the cache pos " + std::to_string(pos) + " n " + std::to_string(n) + " hd " + std::to_string(hd));
  }
}

TEST_F(Ops, Bf16GemmAccumulatesInFp32) {
  // bf16 x bf16 products are exact in fp32 (8-bit significands), so with fp32 output the only
  // error is the fp32 accumulation: the fp32 bound holds against double over the rounded inputs.
  // A bf16 output adds its own rounding, half an ulp: 2^-9 relative per element.
  const int M = 70, N = 130, K = 300;
  std::vector<bf16> a(size_t(M) * K), b(size_t(N) * K);
  const auto fa = random_vector(a.size(), 26), fb = random_vector(b.size(), 27);
  for (size_t i = 0; i < a.size(); ++i) a[i] = to_bf16(fa[i]);
  for (size_t i = 0; i < b.size(); ++i) b[i] = to_bf16(fb[i]);
  std::vector<float> expect(size_t(M) * N);
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) {
      double acc = 0;
      for (int p = 0; p < K; ++p) acc += double(to_float(a[size_t(i) * K + p])) * to_float(b[size_t(j) * K + p]);
      expect[size_t(i) * N + j] = static_cast<float>(acc);
    }
  GemmArgs g;   // C = A B^T, as a linear forward
  g.trans_b = true, g.m = M, g.n = N, g.k = K, g.lda = K, g.ldb = K, g.ldc = N;
  g.a = up(a), g.b = up(b), g.a_type = ScalarType::BF16;
  std::vector<float> c(size_t(M) * N);
  g.c = up(c);
  cuda::lt_gemm(g, cuda::current_stream());
  expect_close(down(static_cast<float*>(g.c), c.size()), expect, "bf16 gemm, fp32 out");
  std::vector<bf16> c16(size_t(M) * N);
  g.c = up(c16), g.c_type = ScalarType::BF16;
  cuda::lt_gemm(g, cuda::current_stream());
  const std::vector<bf16> got = down(static_cast<bf16*>(g.c), c16.size());
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(to_float(got[i]), expect[i], std::abs(expect[i]) * (1.0 / 512 + 1e-5) + 1e-6) << i;
  const size_t plans = cuda::lt_gemm_plans();
  cuda::lt_gemm(g, cuda::current_stream());
  EXPECT_EQ(cuda::lt_gemm_plans(), plans) << "a repeated shape reuses its plan";
}

TEST_F(Ops, AdamWUpdateGivesTheCpuBits) {
  // Both sides do the same fp32 operations without FMA (optim/adamw_update.hpp): equal bits,
  // over steps (bias correction changing), with and without compensation and decay.
  const size_t n = 100003;
  std::vector<float> w = random_vector(n, 25), c(n, 0.0f), m(n, 0.0f), v(n, 0.0f);
  float *d_w = up(w), *d_c = up(c), *d_m = up(m), *d_v = up(v);
  for (int step = 1; step <= 5; ++step) {
    const auto g = random_vector(n, 100 + step, -3, 3);
    const AdamWCoefficients k = adamw_coefficients(0.9, 0.95, 1e-8, 1e-3 * step, step % 2 ? 0.1 : 0.0, step);
    const bool compensated = step != 3;
    adamw_update(w.data(), compensated ? c.data() : nullptr, m.data(), v.data(), g.data(), 0.7f, n, k);
    cuda::adamw_update(d_w, compensated ? d_c : nullptr, d_m, d_v, up(g), 0.7f, n, k);
    for (auto [dev, host, name] : {std::tuple{d_w, &w, "w"}, {d_c, &c, "compensation"}, {d_m, &m, "m"}, {d_v, &v, "v"}}) {
      const std::vector<float> got = down(dev, n);
      ASSERT_EQ(std::memcmp(got.data(), host->data(), n * sizeof(float)), 0) << name << " differs at step " << step;
    }
  }
}

}  // namespace
}  // namespace asteria
