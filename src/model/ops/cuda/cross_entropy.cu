// Fused softmax cross-entropy with z-loss on CUDA: one block per row computes the row's loss
// terms and overwrites its logits with the gradient; one more block sums the rows' terms in row
// order (deterministic) (contract: ops/cross_entropy.hpp). The result is returned on the host,
// so the call waits for the current stream.
#include "model/ops/cross_entropy.hpp"
#include "model/ops/cuda/kernel_util.cuh"

namespace asteria::ops::cuda {

using namespace cuda_detail;

namespace {

constexpr int kThreads = 256;

__global__ void cross_entropy_rows_kernel(float* logits, const int32_t* targets, int V, double z_loss, float inv_n,
                                          double* row_terms) {
  __shared__ float shared[kWarp];
  float* row = logits + static_cast<size_t>(blockIdx.x) * V;
  const int target = targets[blockIdx.x];
  float mx = -INFINITY;
  for (int j = threadIdx.x; j < V; j += blockDim.x) mx = fmaxf(mx, row[j]);
  mx = block_reduce<true>(mx, shared);
  const float target_logit = row[target];
  __syncthreads();   // every thread has read it before the loop below overwrites the row
  float sum = 0;
  for (int j = threadIdx.x; j < V; j += blockDim.x) {
    const float e = expf(row[j] - mx);
    row[j] = e;
    sum += e;
  }
  sum = block_reduce<false>(sum, shared);
  const float lse = mx + logf(sum);
  const float k = (1.0f + static_cast<float>(2 * z_loss) * lse) * inv_n / sum;
  for (int j = threadIdx.x; j < V; j += blockDim.x) row[j] = row[j] * k - (j == target ? inv_n : 0.0f);
  if (threadIdx.x == 0) {
    row_terms[2 * blockIdx.x] = static_cast<double>(mx - target_logit) + log(static_cast<double>(sum));
    row_terms[2 * blockIdx.x + 1] = static_cast<double>(lse) * static_cast<double>(lse);
  }
}

// Sums the rows' terms: each thread a strided share in order, then a fixed tree.
__global__ void sum_terms_kernel(const double* row_terms, int N, double* out) {
  __shared__ double ce[kThreads], z[kThreads];
  double a = 0, b = 0;
  for (int n = threadIdx.x; n < N; n += kThreads) {
    a += row_terms[2 * n];
    b += row_terms[2 * n + 1];
  }
  ce[threadIdx.x] = a;
  z[threadIdx.x] = b;
  __syncthreads();
  for (int s = kThreads / 2; s > 0; s /= 2) {
    if (threadIdx.x < s) {
      ce[threadIdx.x] += ce[threadIdx.x + s];
      z[threadIdx.x] += z[threadIdx.x + s];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    out[0] = ce[0];
    out[1] = z[0];
  }
}

}  // namespace

template <>
CrossEntropyResult cross_entropy_fused<float>(float* logits, const int32_t* targets, int N, int V, double z_loss,
                                              int mean_over) {
  if (mean_over == 0) mean_over = N;
  if (N == 0) return {};
  cudaStream_t s = asteria::cuda::current_stream();
  double* terms = static_cast<double*>(asteria::cuda::thread_workspace(sizeof(double) * (2 * static_cast<size_t>(N) + 2)));
  cross_entropy_rows_kernel<<<N, kThreads, 0, s>>>(logits, targets, V, z_loss, 1.0f / static_cast<float>(mean_over),
                                                   terms + 2);
  ASTERIA_CUDA_LAUNCH_CHECK();
  sum_terms_kernel<<<1, kThreads, 0, s>>>(terms + 2, N, terms);
  ASTERIA_CUDA_LAUNCH_CHECK();
  double sums[2];
  ASTERIA_CUDA_CHECK(cudaMemcpyAsync(sums, terms, sizeof sums, cudaMemcpyDeviceToHost, s));
  ASTERIA_CUDA_CHECK(cudaStreamSynchronize(s));
  return {sums[0] / mean_over, sums[1] / mean_over};
}

}  // namespace asteria::ops::cuda
