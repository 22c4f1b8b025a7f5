// Linear layer on CUDA: the same two GEMMs as the CPU op, through cuBLASLt (contract:
// ops/linear.hpp); fp32, or bf16 operands with fp32 accumulation and output.
#include "core/cuda/cublaslt_gemm.hpp"
#include "model/ops/cuda/kernel_util.cuh"
#include "model/ops/linear.hpp"

namespace asteria::ops::cuda {

using asteria::cuda::gemm;

template <>
void linear_forward<float>(float* out, const float* inp, const float* weight, int N, int IC, int OC, bool accumulate) {
  gemm(false, true, N, OC, IC, 1.0f, inp, IC, weight, IC, accumulate ? 1.0f : 0.0f, out, OC);
}

template <>
void linear_backward<float>(float* dinp, float* dweight, const float* dout, const float* inp, const float* weight,
                            int N, int IC, int OC, float scale, bool accumulate_dinp) {
  if (dinp) gemm(false, false, N, IC, OC, 1.0f, dout, OC, weight, IC, accumulate_dinp ? 1.0f : 0.0f, dinp, IC);
  gemm(true, false, OC, IC, N, scale, dout, OC, inp, IC, 1.0f, dweight, IC);
}

namespace {

using cuda_detail::blocks_for;

__global__ void to_bf16_kernel(__nv_bfloat16* out, const float* in, size_t n) {
  const size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = __float2bfloat16_rn(in[i]);
}

// bf16 copies of up to three fp32 operands, side by side in the thread's workspace (each at a
// 256-byte boundary, which cuBLASLt's fastest kernels want).
struct Bf16Copies {
  __nv_bfloat16* p[3] = {};
};

Bf16Copies to_bf16(std::initializer_list<std::pair<const float*, size_t>> operands) {
  auto padded = [](size_t n) { return (n + 127) / 128 * 128; };
  size_t total = 0;
  for (const auto& o : operands) total += padded(o.second);
  auto* w = static_cast<__nv_bfloat16*>(asteria::cuda::thread_workspace(total * sizeof(__nv_bfloat16)));
  Bf16Copies out;
  int i = 0;
  for (const auto& [src, n] : operands) {
    out.p[i++] = w;
    if (n > 0) {
      to_bf16_kernel<<<blocks_for(n, 256), 256, 0, asteria::cuda::current_stream()>>>(w, src, n);
      ASTERIA_CUDA_LAUNCH_CHECK();
    }
    w += padded(n);
  }
  return out;
}

// The weight's bf16 values: its copy when given (read in place), else rounded into h.p[slot].
const __nv_bfloat16* weight_operand(const uint16_t* weight_bf16, const Bf16Copies& h, int slot) {
  return weight_bf16 ? reinterpret_cast<const __nv_bfloat16*>(weight_bf16) : h.p[slot];
}

}  // namespace

template <>
void linear_forward_bf16<float>(float* out, const float* inp, const float* weight, const uint16_t* weight_bf16, int N,
                                int IC, int OC, bool accumulate) {
  const Bf16Copies h = to_bf16({{inp, size_t(N) * IC}, {weight, weight_bf16 ? 0 : size_t(OC) * IC}});
  gemm(false, true, N, OC, IC, 1.0f, h.p[0], IC, weight_operand(weight_bf16, h, 1), IC, accumulate ? 1.0f : 0.0f, out, OC);
}

template <>
void linear_backward_bf16<float>(float* dinp, float* dweight, const float* dout, const float* inp, const float* weight,
                                 const uint16_t* weight_bf16, int N, int IC, int OC, float scale, bool accumulate_dinp) {
  const Bf16Copies h =
      to_bf16({{dout, size_t(N) * OC}, {inp, size_t(N) * IC}, {weight, dinp && !weight_bf16 ? size_t(OC) * IC : 0}});
  if (dinp)
    gemm(false, false, N, IC, OC, 1.0f, h.p[0], OC, weight_operand(weight_bf16, h, 2), IC, accumulate_dinp ? 1.0f : 0.0f,
         dinp, IC);
  gemm(true, false, OC, IC, N, scale, h.p[0], OC, h.p[1], IC, 1.0f, dweight, IC);
}

}  // namespace asteria::ops::cuda
