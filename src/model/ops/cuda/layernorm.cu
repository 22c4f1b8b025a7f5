// LayerNorm on CUDA: one warp per row, fp32 (contract: ops/layernorm.hpp).
#include "model/ops/cuda/kernel_util.cuh"
#include "model/ops/layernorm.hpp"

namespace asteria::ops::cuda {

using namespace cuda_detail;

namespace {

constexpr int kRowsPerBlock = 8;

__global__ void layernorm_forward_kernel(float* out, float* mean, float* rstd, const float* inp,
                                         const float* residual, int N, int C, float eps) {
  const int n = blockIdx.x * kRowsPerBlock + threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  if (n >= N) return;
  const float* x = inp + static_cast<size_t>(n) * C;
  float sum = 0;
  for (int c = lane; c < C; c += kWarp) sum += x[c];
  const float m = warp_sum(sum) / C;
  float sq = 0;
  for (int c = lane; c < C; c += kWarp) sq += (x[c] - m) * (x[c] - m);
  const float s = 1.0f / sqrtf(warp_sum(sq) / C + eps);
  float* y = out + static_cast<size_t>(n) * C;
  const float* r = residual ? residual + static_cast<size_t>(n) * C : nullptr;
  for (int c = lane; c < C; c += kWarp) y[c] = (r ? r[c] : 0.0f) + (x[c] - m) * s;
  if (lane == 0) {
    mean[n] = m;
    rstd[n] = s;
  }
}

__global__ void layernorm_backward_kernel(float* dinp, const float* dout, const float* inp, const float* mean,
                                          const float* rstd, int N, int C, bool accumulate) {
  const int n = blockIdx.x * kRowsPerBlock + threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  if (n >= N) return;
  const float* x = inp + static_cast<size_t>(n) * C;
  const float* g = dout + static_cast<size_t>(n) * C;
  float* dx = dinp + static_cast<size_t>(n) * C;
  const float m = mean[n], s = rstd[n];
  float sum_g = 0, sum_gx = 0;
  for (int c = lane; c < C; c += kWarp) {
    sum_g += g[c];
    sum_gx += g[c] * (x[c] - m) * s;
  }
  const float mean_g = warp_sum(sum_g) / C, mean_gx = warp_sum(sum_gx) / C;
  // Each element is read by the thread that writes it, after the sums: dinp may alias dout.
  for (int c = lane; c < C; c += kWarp) {
    const float v = s * (g[c] - mean_g - (x[c] - m) * s * mean_gx);
    dx[c] = accumulate ? dx[c] + v : v;
  }
}

}  // namespace

template <>
void layernorm_forward<float>(float* out, float* mean, float* rstd, const float* inp, const float* residual, int N,
                              int C, double eps) {
  if (N == 0) return;
  layernorm_forward_kernel<<<blocks_for(N, kRowsPerBlock), kRowsPerBlock * kWarp, 0, asteria::cuda::current_stream()>>>(
      out, mean, rstd, inp, residual, N, C, static_cast<float>(eps));
  ASTERIA_CUDA_LAUNCH_CHECK();
}

template <>
void layernorm_backward<float>(float* dinp, const float* dout, const float* inp, const float* mean, const float* rstd,
                               int N, int C, bool accumulate) {
  if (N == 0) return;
  layernorm_backward_kernel<<<blocks_for(N, kRowsPerBlock), kRowsPerBlock * kWarp, 0, asteria::cuda::current_stream()>>>(
      dinp, dout, inp, mean, rstd, N, C, accumulate);
  ASTERIA_CUDA_LAUNCH_CHECK();
}

}  // namespace asteria::ops::cuda
