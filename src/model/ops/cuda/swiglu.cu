// SwiGLU on CUDA: one thread per output element (contract: ops/swiglu.hpp).
#include "model/ops/cuda/kernel_util.cuh"
#include "model/ops/swiglu.hpp"

namespace asteria::ops::cuda {

using namespace cuda_detail;

namespace {

__global__ void swiglu_forward_kernel(float* out, const float* inp, int N, int F) {
  const size_t id = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (id >= static_cast<size_t>(N) * F) return;
  const size_t n = id / F, i = id % F;
  const float x = inp[n * 2 * F + i], g = inp[n * 2 * F + F + i];
  out[id] = x * g / (1.0f + expf(-g));
}

__global__ void swiglu_backward_kernel(float* dinp, const float* dout, const float* inp, int N, int F) {
  const size_t id = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (id >= static_cast<size_t>(N) * F) return;
  const size_t n = id / F, i = id % F;
  const float x = inp[n * 2 * F + i], g = inp[n * 2 * F + F + i], dy = dout[id];
  const float sig = 1.0f / (1.0f + expf(-g));
  dinp[n * 2 * F + i] = dy * g * sig;
  dinp[n * 2 * F + F + i] = dy * x * sig * (1.0f + g * (1.0f - sig));
}

}  // namespace

template <>
void swiglu_forward<float>(float* out, const float* inp, int N, int F) {
  const size_t n = static_cast<size_t>(N) * F;
  if (n == 0) return;
  swiglu_forward_kernel<<<blocks_for(n, 256), 256, 0, asteria::cuda::current_stream()>>>(out, inp, N, F);
  ASTERIA_CUDA_LAUNCH_CHECK();
}

template <>
void swiglu_backward<float>(float* dinp, const float* dout, const float* inp, int N, int F) {
  const size_t n = static_cast<size_t>(N) * F;
  if (n == 0) return;
  swiglu_backward_kernel<<<blocks_for(n, 256), 256, 0, asteria::cuda::current_stream()>>>(dinp, dout, inp, N, F);
  ASTERIA_CUDA_LAUNCH_CHECK();
}

}  // namespace asteria::ops::cuda
