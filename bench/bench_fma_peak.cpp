// bench_fma_peak: the CPU's measured fp32 FMA peak, the ceiling the training benchmarks report
// their FLOP/s against (bench/gemm_engines.sh). Each thread runs independent chains of fused
// multiply-adds on registers (no memory traffic), once with AVX2 (8 lanes) and, where the CPU
// has it, once with AVX-512 (16 lanes); a chain per FMA latency x units keeps every pipe busy.
// Zen 4 runs AVX-512 as two 256-bit halves, so its two rates are about the same; Zen 5 and
// Intel's AVX-512 cores double the AVX2 rate. Output: one JSON object on stdout.
//   bench_fma_peak [--threads N] [--seconds S]
#include <immintrin.h>
#include <omp.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include <nlohmann/json.hpp>

#include "core/cpu/blas_kernels.hpp"

namespace {

constexpr int kChains = 12;        // independent accumulators per thread
constexpr long kInner = 1 << 20;   // FMAs per chain between clock reads

__attribute__((target("avx2,fma"))) float avx2_chains(long rounds) {
  __m256 acc[kChains];
  const __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-7f);
  for (int c = 0; c < kChains; c++) acc[c] = _mm256_set1_ps(float(c));
  for (long r = 0; r < rounds; r++)
    for (int c = 0; c < kChains; c++) acc[c] = _mm256_fmadd_ps(acc[c], a, b);
  __m256 s = acc[0];
  for (int c = 1; c < kChains; c++) s = _mm256_add_ps(s, acc[c]);
  alignas(32) float out[8];
  _mm256_store_ps(out, s);
  return out[0];
}

__attribute__((target("avx512f"))) float avx512_chains(long rounds) {
  __m512 acc[kChains];
  const __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
  for (int c = 0; c < kChains; c++) acc[c] = _mm512_set1_ps(float(c));
  for (long r = 0; r < rounds; r++)
    for (int c = 0; c < kChains; c++) acc[c] = _mm512_fmadd_ps(acc[c], a, b);
  __m512 s = acc[0];
  for (int c = 1; c < kChains; c++) s = _mm512_add_ps(s, acc[c]);
  return _mm512_reduce_add_ps(s);
}

// GFLOP/s of `threads` threads each running fn for about `seconds`.
double rate(float (*fn)(long), int lanes, int threads, double seconds) {
  double total = 0;
  volatile float sink = 0;
#pragma omp parallel num_threads(threads) reduction(+ : total)
  {
    fn(kInner / 16);   // warm-up: clocks up, AVX-512 units on
    long rounds = 0;
    const auto t0 = std::chrono::steady_clock::now();
    double el = 0;
    do {
      sink = sink + fn(kInner);
      rounds += kInner;
      el = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    } while (el < seconds);
    total += 2.0 * lanes * kChains * double(rounds) / el * 1e-9;
  }
  return total;
}

}  // namespace

int main(int argc, char** argv) {
  int threads = omp_get_max_threads();
  double seconds = 2.0;
  for (int i = 1; i < argc; i++) {
    const std::string a = argv[i];
    if (a == "--threads" && i + 1 < argc) threads = std::atoi(argv[++i]);
    else if (a == "--seconds" && i + 1 < argc) seconds = std::atof(argv[++i]);
    else {
      std::fprintf(stderr, "usage: bench_fma_peak [--threads N] [--seconds S]\n");
      return 2;
    }
  }
  const asteria::CpuFeatures cpu = asteria::detect_cpu();
  nlohmann::json j = {{"bench", "fma_peak"},
                      {"cpu", cpu.model_name},
                      {"cpu_features", asteria::feature_list(cpu)},
                      {"threads", threads},
                      {"avx2_gflops", rate(avx2_chains, 8, threads, seconds)}};
  if (cpu.avx512) j["avx512_gflops"] = rate(avx512_chains, 16, threads, seconds);
  j["peak_gflops"] = std::max(j["avx2_gflops"].get<double>(), j.value("avx512_gflops", 0.0));
  std::printf("%s\n", j.dump().c_str());
  return 0;
}
