// bf16 storage on CUDA: one thread per element (contract: ops/bf16_storage.hpp).
// __float2bfloat16_rn rounds to nearest even and keeps NaN a NaN, as core/bf16.hpp does.
#include <cuda_bf16.h>

#include "model/ops/bf16_storage.hpp"
#include "model/ops/cuda/kernel_util.cuh"

namespace asteria::ops::cuda {

using namespace cuda_detail;

namespace {

__global__ void pack_kernel(__nv_bfloat16* dst, const float* src, size_t n) {
  const size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) dst[i] = __float2bfloat16_rn(src[i]);
}

__global__ void unpack_kernel(float* dst, const __nv_bfloat16* src, size_t n) {
  const size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) dst[i] = __bfloat162float(src[i]);
}

__global__ void round_kernel(float* dst, const float* src, size_t n) {
  const size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) dst[i] = __bfloat162float(__float2bfloat16_rn(src[i]));
}

}  // namespace

void pack_bf16(uint16_t* dst, const float* src, size_t n) {
  if (n == 0) return;
  pack_kernel<<<blocks_for(n, 256), 256, 0, asteria::cuda::current_stream()>>>(reinterpret_cast<__nv_bfloat16*>(dst),
                                                                               src, n);
  ASTERIA_CUDA_LAUNCH_CHECK();
}

void unpack_bf16(float* dst, const uint16_t* src, size_t n) {
  if (n == 0) return;
  unpack_kernel<<<blocks_for(n, 256), 256, 0, asteria::cuda::current_stream()>>>(
      dst, reinterpret_cast<const __nv_bfloat16*>(src), n);
  ASTERIA_CUDA_LAUNCH_CHECK();
}

void round_to_bf16(float* dst, const float* src, size_t n) {
  if (n == 0) return;
  round_kernel<<<blocks_for(n, 256), 256, 0, asteria::cuda::current_stream()>>>(dst, src, n);
  ASTERIA_CUDA_LAUNCH_CHECK();
}

}  // namespace asteria::ops::cuda
