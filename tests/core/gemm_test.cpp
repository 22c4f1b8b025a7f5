// The CPU backend's GEMMs (core/cpu/gemm.hpp, gemm_routing.hpp): every path (OpenBLAS fp32,
// oneDNN fp32, oneDNN bf16) against an fp64 reference at the model's shapes and at awkward ones
// (odd and degenerate sizes, every transpose, padded row strides, strided views, alpha, beta);
// the same bits from call to call; and the routing rule on each CPU kind.
#include <gtest/gtest.h>

#include <cblas.h>
#include <omp.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/bf16.hpp"
#include "core/cpu/gemm.hpp"
#include "core/cpu/gemm_routing.hpp"

using namespace asteria;

namespace {

struct Shape {
  bool ta, tb;
  int M, N, K;
  int pad = 0;   // added to every row stride
  float alpha = 1.f, beta = 0.f;
  const char* what = "";
};

std::string name(const Shape& s) {
  return std::string(s.what) + " " + (s.ta ? "T" : "N") + (s.tb ? "T" : "N") + " " + std::to_string(s.M) + "x" +
         std::to_string(s.N) + "x" + std::to_string(s.K) + " pad " + std::to_string(s.pad) + " alpha " +
         std::to_string(s.alpha) + " beta " + std::to_string(s.beta);
}

// The shapes of a bench-small step (d 256, SwiGLU 1024, vocab 4096, 8 x 256 tokens) and of the
// optimizers' products (SOAP's rotations and factor updates on 256- and 1024-blocks), then
// awkward ones.
std::vector<Shape> shapes() {
  return {{false, true, 2048, 768, 256, 0, 1.f, 0.f, "qkv forward"},
          {false, false, 2048, 256, 2048, 0, 1.f, 1.f, "mlp down dX"},
          {true, false, 4096, 256, 2048, 0, 0.5f, 1.f, "lm head dW"},
          {true, false, 256, 1024, 2048, 0, 1.f, 1.f, "mlp up dW"},
          {false, true, 256, 256, 64, 704, 0.125f, 0.f, "attention scores (q, k in fused qkv rows)"},
          {true, false, 256, 64, 256, 704, 1.f, 0.f, "attention dV"},
          {false, false, 1024, 1024, 1024, 0, 1.f, 0.f, "rotation Q^T G Q"},
          {true, false, 1024, 1024, 256, 0, 0.05f, 0.95f, "factor update G^T G"},
          {false, false, 1, 1, 1, 0, 1.f, 0.f, "scalar"},
          {false, true, 7, 13, 5, 3, -1.25f, 0.75f, "odd"},
          {true, true, 33, 65, 129, 1, 1.f, 1.f, "odd"},
          {true, false, 127, 1, 300, 5, 2.f, 0.f, "one column"},
          {false, true, 1, 255, 17, 0, 1.f, -1.f, "one row"},
          {false, false, 300, 257, 1031, 2, 0.5f, 0.25f, "long odd reduction"},
          {true, false, 129, 131, 1500, 0, 1.f, 0.f, "transposed A, K >= 1024"}};
}

std::vector<float> random_values(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

std::vector<float> rounded_to_bf16(std::vector<float> v) {
  for (float& x : v) x = to_float(to_bf16(x));
  return v;
}

struct Operands {
  int lda, ldb, ldc;
  std::vector<float> a, b, c0;
};

Operands operands(const Shape& s, uint32_t seed) {
  Operands o;
  o.lda = (s.ta ? s.M : s.K) + s.pad;
  o.ldb = (s.tb ? s.K : s.N) + s.pad;
  o.ldc = s.N + s.pad;
  o.a = random_values(size_t(s.ta ? s.K : s.M) * o.lda, seed);
  o.b = random_values(size_t(s.tb ? s.N : s.K) * o.ldb, seed + 1);
  o.c0 = random_values(size_t(s.M) * o.ldc, seed + 2);
  return o;
}

// Checks c against the fp64 product of o's values: each element within (K + 2) fp32 units of
// the sum of magnitudes it adds, the bound of any fp32 summation order; elements outside the
// M x N result (row padding) untouched.
void expect_near_fp64(const Shape& s, const Operands& o, const std::vector<float>& c, const std::string& path) {
  const auto d = [](const std::vector<float>& v) { return std::vector<double>(v.begin(), v.end()); };
  const auto abs_d = [](const std::vector<float>& v) {
    std::vector<double> r(v.size());
    for (size_t i = 0; i < v.size(); i++) r[i] = std::fabs(double(v[i]));
    return r;
  };
  std::vector<double> want = d(o.c0), mag = abs_d(o.c0);
  const auto ta = s.ta ? CblasTrans : CblasNoTrans, tb = s.tb ? CblasTrans : CblasNoTrans;
  cblas_dgemm(CblasRowMajor, ta, tb, s.M, s.N, s.K, s.alpha, d(o.a).data(), o.lda, d(o.b).data(), o.ldb, s.beta,
              want.data(), o.ldc);
  cblas_dgemm(CblasRowMajor, ta, tb, s.M, s.N, s.K, std::fabs(s.alpha), abs_d(o.a).data(), o.lda,
              abs_d(o.b).data(), o.ldb, std::fabs(s.beta), mag.data(), o.ldc);
  const double unit = std::ldexp(1.0, -24);
  int bad = 0;
  for (int m = 0; m < s.M; m++)
    for (int n = 0; n < o.ldc; n++) {
      const size_t i = size_t(m) * o.ldc + n;
      if (n >= s.N) {
        if (c[i] != o.c0[i] && ++bad <= 3) ADD_FAILURE() << path << " " << name(s) << ": wrote padding at " << m << "," << n;
        continue;
      }
      const double bound = (s.K + 2) * unit * mag[i];
      if (!(std::fabs(c[i] - want[i]) <= bound) && ++bad <= 3)
        ADD_FAILURE() << path << " " << name(s) << " at " << m << "," << n << ": " << c[i] << " vs fp64 " << want[i]
                      << " (bound " << bound << ")";
    }
}

// Sets the process's routing for a test and puts back the default (auto) after it.
struct RoutingScope {
  explicit RoutingScope(GemmChoice c) { set_gemm_choice(c); }
  ~RoutingScope() { set_gemm_choice(GemmChoice::Auto); }
};

std::vector<float> fp32_gemm(const Shape& s, const Operands& o) {
  std::vector<float> c = o.c0;
  cpu::gemm(s.ta, s.tb, s.M, s.N, s.K, s.alpha, o.a.data(), o.lda, o.b.data(), o.ldb, s.beta, c.data(), o.ldc);
  return c;
}

std::vector<uint16_t> bf16_bits(const std::vector<float>& v) {
  std::vector<uint16_t> r(v.size());
  for (size_t i = 0; i < v.size(); i++) r[i] = to_bf16(v[i]).bits;
  return r;
}

std::vector<float> bf16_gemm(const Shape& s, const Operands& o) {
  std::vector<float> c = o.c0;
  const std::vector<uint16_t> a = bf16_bits(o.a), b = bf16_bits(o.b);
  cpu::gemm_bf16(s.ta, s.tb, s.M, s.N, s.K, s.alpha, a.data(), o.lda, b.data(), o.ldb, s.beta, c.data(), o.ldc);
  return c;
}

}  // namespace

TEST(Gemm, EveryFp32PathMatchesFp64AndRepeatsItsBits) {
  for (const GemmChoice choice : {GemmChoice::OpenBlas, GemmChoice::OneDnn, GemmChoice::Auto}) {
    RoutingScope scope(choice);
    uint32_t seed = 10;
    for (const Shape& s : shapes()) {
      const Operands o = operands(s, seed += 3);
      const std::vector<float> c = fp32_gemm(s, o);
      expect_near_fp64(s, o, c, to_string(choice));
      EXPECT_EQ(c, fp32_gemm(s, o)) << to_string(choice) << " " << name(s) << ": not the same bits twice";
    }
  }
}

TEST(Gemm, Bf16KernelsMatchFp64OnTheRoundedOperandsAndRepeatTheirBits) {
  if (!cpu::bf16_gemm_available())
    GTEST_SKIP() << "no oneDNN bf16 kernels on this CPU (" << gemm_report().dump() << ")";
  uint32_t seed = 50;
  for (const Shape& s : shapes()) {
    Operands o = operands(s, seed += 3);
    const std::vector<float> c = bf16_gemm(s, o);
    EXPECT_EQ(c, bf16_gemm(s, o)) << name(s) << ": not the same bits twice";
    o.a = rounded_to_bf16(o.a);
    o.b = rounded_to_bf16(o.b);
    expect_near_fp64(s, o, c, "onednn bf16");
  }
}

// Inside an OpenMP loop (attention's heads) each GEMM runs on its thread alone: every thread's
// result is right and the same as the others'.
TEST(Gemm, CallsInsideAnOpenMpLoopAreRightOnEveryThread) {
  const Shape s{false, true, 256, 256, 64, 704, 0.125f, 0.f, "scores"};
  const Operands o = operands(s, 7);
  const int threads = std::max(2, omp_get_max_threads());
  std::vector<std::vector<float>> fp32(4 * threads), bf16(4 * threads);
#pragma omp parallel for num_threads(threads) schedule(static, 1)
  for (int i = 0; i < 4 * threads; i++) {
    fp32[i] = fp32_gemm(s, o);
    if (cpu::bf16_gemm_available()) bf16[i] = bf16_gemm(s, o);
  }
  expect_near_fp64(s, o, fp32[0], "fp32 in a parallel loop");
  for (int i = 1; i < 4 * threads; i++) {
    EXPECT_EQ(fp32[i], fp32[0]) << i;
    EXPECT_EQ(bf16[i], bf16[0]) << i;
  }
}

// The rule (gemm_routing.hpp) on the CPU kinds of the brief.
TEST(GemmRouting, AutoTakesOneDnnWhereItsKernelsAreTheFaster) {
  auto route = [](OneDnnIsa isa, bool checked, bool ta, int K, GemmChoice c = GemmChoice::Auto) {
    return route_sgemm(GemmRouting{c, isa, checked}, ta, K);
  };
  const GemmLibrary onednn = GemmLibrary::OneDnn, openblas = GemmLibrary::OpenBlas;
  for (const OneDnnIsa isa : {OneDnnIsa::Avx512, OneDnnIsa::Avx512Bf16}) {   // Zen 4/5, Xeons
    EXPECT_EQ(route(isa, true, false, 256), onednn);
    EXPECT_EQ(route(isa, true, true, 4096), onednn);
    EXPECT_EQ(route(isa, false, false, 256), openblas);   // failed its self-check
  }
  EXPECT_EQ(route(OneDnnIsa::Avx2, true, false, 4096), onednn);   // Zen 3
  EXPECT_EQ(route(OneDnnIsa::Avx2, true, true, 1023), onednn);
  EXPECT_EQ(route(OneDnnIsa::Avx2, true, true, 1024), openblas);
  EXPECT_EQ(route(OneDnnIsa::None, true, false, 64), openblas);
  EXPECT_EQ(route(OneDnnIsa::Avx512, true, false, 64, GemmChoice::OpenBlas), openblas);
  EXPECT_EQ(route(OneDnnIsa::None, true, true, 4096, GemmChoice::OneDnn), onednn);
}

// This machine: oneDNN passed its self-check, and auto's report says what runs.
TEST(GemmRouting, ThisCpuPassesTheSelfCheckAndTheReportSaysTheRoute) {
  const GemmRouting& r = gemm_routing();
  EXPECT_EQ(r.choice, GemmChoice::Auto);
  EXPECT_TRUE(r.onednn_checked);
  const nlohmann::json j = gemm_report();
  EXPECT_EQ(j["setting"], "auto");
  EXPECT_EQ(j["onednn_isa"], to_string(r.isa));
  if (r.isa == OneDnnIsa::Avx512 || r.isa == OneDnnIsa::Avx512Bf16) EXPECT_EQ(j["fp32"], "onednn");
  EXPECT_EQ(cpu::bf16_gemm_available(), r.isa == OneDnnIsa::Avx512Bf16);
  RoutingScope pinned(GemmChoice::OpenBlas);
  EXPECT_FALSE(cpu::bf16_gemm_available());
  EXPECT_EQ(gemm_report()["fp32"], "openblas");
}
