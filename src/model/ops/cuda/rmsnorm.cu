// RMSNorm on CUDA: one warp per row; the weight gradient one thread per column over all rows,
// in row order, so it is deterministic (contract: ops/rmsnorm.hpp).
#include "model/ops/cuda/kernel_util.cuh"
#include "model/ops/rmsnorm.hpp"

namespace asteria::ops::cuda {

using namespace cuda_detail;

namespace {

constexpr int kRowsPerBlock = 8;

__global__ void rmsnorm_forward_kernel(float* out, int ldo, float* rstd, const float* inp, int ldi,
                                       const float* weight, const float* residual, int N, int C, float eps) {
  const int n = blockIdx.x * kRowsPerBlock + threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  if (n >= N) return;
  const float* x = inp + static_cast<size_t>(n) * ldi;
  float sq = 0;
  for (int c = lane; c < C; c += kWarp) sq += x[c] * x[c];
  const float s = 1.0f / sqrtf(warp_sum(sq) / C + eps);
  float* y = out + static_cast<size_t>(n) * ldo;
  const float* r = residual ? residual + static_cast<size_t>(n) * ldo : nullptr;
  for (int c = lane; c < C; c += kWarp) y[c] = (r ? r[c] : 0.0f) + x[c] * s * weight[c];
  if (lane == 0) rstd[n] = s;
}

__global__ void rmsnorm_dweight_kernel(float* dweight, const float* dout, int ld_dout, const float* inp, int ldi,
                                       const float* rstd, int N, int C, float scale) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= C) return;
  float acc = 0;
  for (int n = 0; n < N; n++)
    acc += dout[static_cast<size_t>(n) * ld_dout + c] * inp[static_cast<size_t>(n) * ldi + c] * rstd[n];
  dweight[c] += scale * acc;
}

__global__ void rmsnorm_dinp_kernel(float* dinp, int ld_dinp, const float* dout, int ld_dout, const float* inp,
                                    int ldi, const float* weight, const float* rstd, int N, int C, bool accumulate) {
  const int n = blockIdx.x * kRowsPerBlock + threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  if (n >= N) return;
  const float* x = inp + static_cast<size_t>(n) * ldi;
  const float* g = dout + static_cast<size_t>(n) * ld_dout;
  float* dx = dinp + static_cast<size_t>(n) * ld_dinp;
  const float s = rstd[n];
  float dot = 0;
  for (int c = lane; c < C; c += kWarp) dot += g[c] * weight[c] * x[c];
  const float k = warp_sum(dot) * s * s / C;
  for (int c = lane; c < C; c += kWarp) {
    const float v = s * (g[c] * weight[c] - x[c] * k);
    dx[c] = accumulate ? dx[c] + v : v;
  }
}

}  // namespace

template <>
void rmsnorm_forward<float>(float* out, int ldo, float* rstd, const float* inp, int ldi, const float* weight,
                            const float* residual, int N, int C, double eps) {
  if (N == 0) return;
  rmsnorm_forward_kernel<<<blocks_for(N, kRowsPerBlock), kRowsPerBlock * kWarp, 0, asteria::cuda::current_stream()>>>(
      out, ldo, rstd, inp, ldi, weight, residual, N, C, static_cast<float>(eps));
  ASTERIA_CUDA_LAUNCH_CHECK();
}

template <>
void rmsnorm_backward<float>(float* dinp, int ld_dinp, float* dweight, const float* dout, int ld_dout,
                             const float* inp, int ldi, const float* weight, const float* rstd, int N, int C,
                             float scale, bool accumulate) {
  if (N == 0) return;
  cudaStream_t s = asteria::cuda::current_stream();
  // The weight gradient first: it reads dout, which dinp may overwrite.
  rmsnorm_dweight_kernel<<<blocks_for(C, 128), 128, 0, s>>>(dweight, dout, ld_dout, inp, ldi, rstd, N, C, scale);
  ASTERIA_CUDA_LAUNCH_CHECK();
  rmsnorm_dinp_kernel<<<blocks_for(N, kRowsPerBlock), kRowsPerBlock * kWarp, 0, s>>>(dinp, ld_dinp, dout, ld_dout, inp,
                                                                                     ldi, weight, rstd, N, C, accumulate);
  ASTERIA_CUDA_LAUNCH_CHECK();
}

}  // namespace asteria::ops::cuda
