#pragma once
// Shared pieces of the CUDA op kernels: warp and block reductions, launch shapes.
#include <cuda_runtime.h>

#include "core/cuda/cuda_check.hpp"
#include "core/cuda/cuda_context.hpp"

namespace asteria::ops::cuda_detail {

constexpr int kWarp = 32;

__device__ inline float warp_sum(float v) {
  for (int o = kWarp / 2; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ inline float warp_max(float v) {
  for (int o = kWarp / 2; o > 0; o /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Reduces over a block of blockDim.x threads (a multiple of 32, at most 1024); every thread
// gets the result. shared: 32 floats.
template <bool kMax>
__device__ inline float block_reduce(float v, float* shared) {
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp, warps = blockDim.x / kWarp;
  v = kMax ? warp_max(v) : warp_sum(v);
  __syncthreads();   // shared may still be read by a previous reduction
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  v = lane < warps ? shared[lane] : (kMax ? -INFINITY : 0.0f);
  return kMax ? warp_max(v) : warp_sum(v);
}

inline unsigned blocks_for(size_t n, int threads) { return static_cast<unsigned>((n + threads - 1) / threads); }

}  // namespace asteria::ops::cuda_detail
