// The fp32 GEMM routing (contract: core/cpu/gemm_routing.hpp).
#include "core/cpu/gemm_routing.hpp"

#include <atomic>
#include <cmath>
#include <vector>

#include "core/cpu/onednn_gemm.hpp"

namespace asteria {

namespace {

// oneDNN's fp32 products against fp64 on odd shapes, in every transpose and with alpha and
// beta: how far each result may be from the fp64 one is bounded by K ulps of the sum of the
// magnitudes, as any fp32 summation order gives.
bool onednn_sgemm_is_right() {
  const int M = 37, N = 29, K = 83;
  std::vector<float> a(M * K), b(K * N), c(M * N);
  for (size_t i = 0; i < a.size(); i++) a[i] = std::sin(0.37f * float(i) + 0.1f);
  for (size_t i = 0; i < b.size(); i++) b[i] = std::cos(0.53f * float(i) - 0.2f);
  for (int ta = 0; ta < 2; ta++)
    for (int tb = 0; tb < 2; tb++) {
      const int lda = ta ? M : K, ldb = tb ? K : N;
      for (size_t i = 0; i < c.size(); i++) c[i] = 0.25f * float(i % 7);
      const std::vector<float> c0 = c;
      cpu::onednn_sgemm(ta, tb, M, N, K, 0.5f, a.data(), lda, b.data(), ldb, 2.f, c.data(), N);
      for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
          double sum = 0, mag = 0;
          for (int k = 0; k < K; k++) {
            const double x = ta ? a[k * lda + m] : a[m * lda + k];
            const double y = tb ? b[n * ldb + k] : b[k * ldb + n];
            sum += x * y;
            mag += std::fabs(x * y);
          }
          const double want = 0.5 * sum + 2.0 * c0[m * N + n];
          const double bound = (K + 2) * 6e-8 * (0.5 * mag + 2.0 * std::fabs(c0[m * N + n])) + 1e-30;
          if (!(std::fabs(c[m * N + n] - want) <= bound)) return false;
        }
    }
  return true;
}

// runtime.gemm as the process last set it; read by every GEMM (a relaxed load: a run sets it
// before its compute threads start).
std::atomic<GemmChoice> current{GemmChoice::Auto};

}  // namespace

GemmLibrary route_sgemm(const GemmRouting& r, bool trans_a, int K) {
  switch (r.choice) {
    case GemmChoice::OpenBlas: return GemmLibrary::OpenBlas;
    case GemmChoice::OneDnn: return GemmLibrary::OneDnn;
    case GemmChoice::Auto: break;
  }
  if (!r.onednn_checked || r.isa == OneDnnIsa::None) return GemmLibrary::OpenBlas;
  if (r.isa == OneDnnIsa::Avx2 && trans_a && K >= 1024) return GemmLibrary::OpenBlas;
  return GemmLibrary::OneDnn;
}

bool runs_bf16_kernels(const GemmRouting& r) {
  return r.choice != GemmChoice::OpenBlas && r.onednn_checked && r.isa == OneDnnIsa::Avx512Bf16;
}

GemmRouting routing_for(GemmChoice choice) {
  static const OneDnnIsa isa = cpu::onednn_isa();
  GemmRouting r{choice, isa, true};
  if (choice == GemmChoice::Auto && isa != OneDnnIsa::None) {
    static const bool right = onednn_sgemm_is_right();   // once per process
    r.onednn_checked = right;
  }
  return r;
}

void set_gemm_choice(GemmChoice choice) { current.store(choice, std::memory_order_relaxed); }

GemmRouting gemm_routing() { return routing_for(current.load(std::memory_order_relaxed)); }

const char* to_string(GemmChoice c) {
  return c == GemmChoice::OpenBlas ? "openblas" : c == GemmChoice::OneDnn ? "onednn" : "auto";
}

const char* to_string(OneDnnIsa isa) {
  switch (isa) {
    case OneDnnIsa::Avx2: return "avx2";
    case OneDnnIsa::Avx512: return "avx512";
    case OneDnnIsa::Avx512Bf16: return "avx512_bf16";
    case OneDnnIsa::None: break;
  }
  return "none";
}

nlohmann::json gemm_report(const GemmRouting& r) {
  std::string fp32;
  if (r.choice != GemmChoice::Auto) fp32 = to_string(r.choice);
  else if (!r.onednn_checked) fp32 = "openblas (oneDNN failed its self-check)";
  else if (r.isa == OneDnnIsa::None) fp32 = "openblas (oneDNN has no AVX2 kernels here)";
  else if (r.isa == OneDnnIsa::Avx2) fp32 = "onednn, openblas for op(A)^T with K >= 1024";
  else fp32 = "onednn";
  const bool bf16 = runs_bf16_kernels(r);
  return {{"setting", to_string(r.choice)},
          {"fp32", fp32},
          {"bf16", bf16 ? "onednn bf16 kernels" : "fp32 GEMMs on bf16-rounded operands"},
          {"onednn", cpu::onednn_version()},
          {"onednn_isa", to_string(r.isa)}};
}

}  // namespace asteria
