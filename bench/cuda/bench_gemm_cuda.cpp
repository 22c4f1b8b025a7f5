// bench_gemm_cuda: cuBLASLt GEMM throughput (core/cuda/cublaslt_gemm) at the shapes of one
// OLMo-1B micro-batch (d 2048, SwiGLU hidden 8192, vocab 50304, M = micro-batch x 2048 tokens)
// in the three forms a linear layer uses (forward X W^T, backward dY W and dY^T X), bf16 inputs
// with fp32 accumulation and fp32 output (the training precision), and fp32 for comparison.
// Reports TFLOP/s per shape, the FLOP-weighted rate of a step's GEMMs back to back, and its
// fraction of the dense bf16 peak (--peak-tflops, default 989: H100/H200 SXM without sparsity).
// Energy (NVML) is that of all the timed runs of one precision, when the GPU has the counter.
// Each time is the median of --repeats timed runs (CUDA events) after warm-up. JSON on stdout.
//   bench_gemm_cuda [--micro-batch 8] [--repeats 10] [--peak-tflops 989]
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/backend.hpp"
#include "core/cuda/cublaslt_gemm.hpp"
#include "core/cuda/cuda_check.hpp"
#include "core/cuda/cuda_context.hpp"
#include "core/nvml_energy.hpp"

namespace {

struct Shape {
  const char* name;
  bool ta, tb;
  int m, n, k;
};

}  // namespace

int main(int argc, char** argv) {
  using namespace asteria;
  int micro_batch = 8, repeats = 10;
  double peak = 989;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--micro-batch")) micro_batch = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--repeats")) repeats = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--peak-tflops")) peak = std::atof(argv[i + 1]);
    else {
      std::fprintf(stderr, "bench_gemm_cuda: unknown option %s\n", argv[i]);
      return 2;
    }
  }
  std::string why;
  if (!cuda_backend_available(&why)) {
    std::fprintf(stderr, "bench_gemm_cuda: %s\n", why.c_str());
    return 77;
  }
  const int M = micro_batch * 2048, d = 2048, f = 8192, V = 50304;
  // Per layer (x 16) and the head once; each linear forward, dX, dW.
  std::vector<Shape> shapes;
  auto linear = [&](const char* name, int out, int in) {
    shapes.push_back({name, false, true, M, out, in});     // Y = X W^T
    shapes.push_back({name, false, false, M, in, out});    // dX = dY W
    shapes.push_back({name, true, false, out, in, M});     // dW = dY^T X
  };
  linear("att_qkv", 3 * d, d);
  linear("att_out", d, d);
  linear("mlp_up", 2 * f, d);
  linear("mlp_down", d, f);
  linear("lm_head", V, d);
  size_t max_elems = 0;
  for (const Shape& s : shapes)
    max_elems = std::max({max_elems, size_t(s.m) * s.k, size_t(s.k) * s.n, size_t(s.m) * s.n});
  void *a = nullptr, *b = nullptr, *c = nullptr;
  ASTERIA_CUDA_CHECK(cudaMalloc(&a, max_elems * 4));
  ASTERIA_CUDA_CHECK(cudaMalloc(&b, max_elems * 4));
  ASTERIA_CUDA_CHECK(cudaMalloc(&c, max_elems * 4));
  ASTERIA_CUDA_CHECK(cudaMemset(a, 0x3c, max_elems * 4));   // small finite values in fp32 and bf16
  ASTERIA_CUDA_CHECK(cudaMemset(b, 0x3c, max_elems * 4));
  cudaStream_t stream;
  ASTERIA_CUDA_CHECK(cudaStreamCreate(&stream));
  cudaEvent_t e0, e1;
  ASTERIA_CUDA_CHECK(cudaEventCreate(&e0));
  ASTERIA_CUDA_CHECK(cudaEventCreate(&e1));
  cudaDeviceProp prop{};
  ASTERIA_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));

  nlohmann::json out;
  out["device"] = prop.name;
  out["micro_batch"] = micro_batch;
  out["tokens"] = M;
  out["peak_bf16_dense_tflops"] = peak;
  NvmlEnergy energy(cuda::current_device_pci_bus_id());   // the GPU computed on
  out["energy_counter"] = energy.available() ? "nvml" : energy.why_not();
  for (ScalarType in : {ScalarType::BF16, ScalarType::F32}) {
    const char* label = in == ScalarType::BF16 ? "bf16_in_fp32_out" : "fp32";
    double flops_total = 0, seconds_total = 0, timed_flops = 0;
    const auto joules_before = energy.joules();
    nlohmann::json rows = nlohmann::json::array();
    for (const Shape& s : shapes) {
      GemmArgs g;
      g.trans_a = s.ta, g.trans_b = s.tb, g.m = s.m, g.n = s.n, g.k = s.k;
      g.a = a, g.b = b, g.c = c;
      g.lda = s.ta ? s.m : s.k, g.ldb = s.tb ? s.k : s.n, g.ldc = s.n;
      g.a_type = in, g.c_type = ScalarType::F32;
      g.beta = s.ta ? 1.0f : 0.0f;   // dW accumulates over micro-batches
      for (int w = 0; w < 3; ++w) cuda::lt_gemm(g, stream);
      std::vector<float> ms;
      for (int r = 0; r < repeats; ++r) {
        ASTERIA_CUDA_CHECK(cudaEventRecord(e0, stream));
        cuda::lt_gemm(g, stream);
        ASTERIA_CUDA_CHECK(cudaEventRecord(e1, stream));
        ASTERIA_CUDA_CHECK(cudaEventSynchronize(e1));
        float t = 0;
        ASTERIA_CUDA_CHECK(cudaEventElapsedTime(&t, e0, e1));
        ms.push_back(t);
      }
      timed_flops += 2.0 * s.m * s.n * s.k * (repeats + 3);   // the warm-ups ran inside the energy window too
      std::sort(ms.begin(), ms.end());
      const double sec = ms[ms.size() / 2] * 1e-3, flops = 2.0 * s.m * s.n * s.k;
      const double weight = std::string(s.name) == "lm_head" ? 1 : 16;   // layers
      flops_total += weight * flops;
      seconds_total += weight * sec;
      rows.push_back({{"name", s.name}, {"trans_a", s.ta}, {"trans_b", s.tb}, {"m", s.m}, {"n", s.n}, {"k", s.k},
                      {"median_ms", sec * 1e3}, {"tflops", flops / sec * 1e-12}});
    }
    const double rate = flops_total / seconds_total * 1e-12;
    out[label] = {{"shapes", rows}, {"step_weighted_tflops", rate}, {"fraction_of_bf16_peak", rate / peak}};
    const auto joules_after = energy.joules();
    if (joules_before && joules_after)
      out[label]["tflop_per_joule"] = timed_flops * 1e-12 / (*joules_after - *joules_before);
  }
  std::printf("%s\n", out.dump(2).c_str());
  return 0;
}
