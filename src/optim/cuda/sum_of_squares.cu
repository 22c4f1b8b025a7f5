// Sum of squares on CUDA in two passes with no atomics, so the result is the same every run:
// a fixed grid of blocks each sums a strided share in double (block tree reduction), then one
// block sums the partials in order.
#include "core/cuda/cuda_check.hpp"
#include "core/cuda/cuda_context.hpp"
#include "optim/sum_of_squares.hpp"

namespace asteria::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int kBlocks = 512;

__device__ double block_sum(double v, double* shared) {
  shared[threadIdx.x] = v;
  __syncthreads();
  for (int s = kThreads / 2; s > 0; s /= 2) {
    if (threadIdx.x < s) shared[threadIdx.x] += shared[threadIdx.x + s];
    __syncthreads();
  }
  return shared[0];
}

__global__ void partial_sums_kernel(const float* x, size_t n, double* partials) {
  __shared__ double shared[kThreads];
  double s = 0;
  for (size_t i = static_cast<size_t>(blockIdx.x) * kThreads + threadIdx.x; i < n; i += static_cast<size_t>(kBlocks) * kThreads) {
    const double v = x[i];
    s += v * v;
  }
  const double total = block_sum(s, shared);
  if (threadIdx.x == 0) partials[blockIdx.x] = total;
}

__global__ void final_sum_kernel(double* partials) {
  __shared__ double shared[kThreads];
  double s = 0;
  for (int i = threadIdx.x; i < kBlocks; i += kThreads) s += partials[i];
  const double total = block_sum(s, shared);
  if (threadIdx.x == 0) partials[kBlocks] = total;
}

}  // namespace

double sum_of_squares(const float* x, size_t n) {
  if (n == 0) return 0;
  const cudaStream_t s = current_stream();
  double* partials = static_cast<double*>(thread_workspace(sizeof(double) * (kBlocks + 1)));
  partial_sums_kernel<<<kBlocks, kThreads, 0, s>>>(x, n, partials);
  ASTERIA_CUDA_LAUNCH_CHECK();
  final_sum_kernel<<<1, kThreads, 0, s>>>(partials);
  ASTERIA_CUDA_LAUNCH_CHECK();
  double total = 0;
  ASTERIA_CUDA_CHECK(cudaMemcpyAsync(&total, partials + kBlocks, sizeof(double), cudaMemcpyDeviceToHost, s));
  ASTERIA_CUDA_CHECK(cudaStreamSynchronize(s));
  return total;
}

}  // namespace asteria::cuda
