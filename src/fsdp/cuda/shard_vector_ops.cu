// ShardVectorOps on the CUDA backend: element kernels on a non-blocking stream of the calling
// thread's own (the comm lane's: the compute lane's kernels need not finish first), each call
// synchronized before it returns; the mean and the sum of squares are the replicas' and the
// gradient norm's device ops.
#include <cuda_runtime.h>

#include "comm/replica_mean.hpp"
#include "core/cuda/cuda_check.hpp"
#include "core/cuda/cuda_context.hpp"
#include "fsdp/shard_vector_ops.hpp"
#include "optim/sum_of_squares.hpp"

namespace asteria {

namespace {

constexpr int kThreads = 256;

unsigned grid_for(size_t n) {
  const size_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < 65535u * 64u ? blocks : 65535u * 64u);   // grid-stride beyond
}

__global__ void add_kernel(float* acc, const float* x, size_t n) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n; i += static_cast<size_t>(gridDim.x) * blockDim.x)
    acc[i] += x[i];
}

// x[0, n) reversed in place: thread i swaps i with n - 1 - i.
__global__ void reverse_kernel(float* x, size_t n) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n / 2; i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const float a = x[i];
    x[i] = x[n - 1 - i];
    x[n - 1 - i] = a;
  }
}

cudaStream_t own_stream() {
  thread_local const cudaStream_t s = [] {
    cudaStream_t made = nullptr;
    ASTERIA_CUDA_CHECK(cudaStreamCreateWithFlags(&made, cudaStreamNonBlocking));
    return made;
  }();
  return s;
}

void reverse(float* x, size_t n, cudaStream_t s) {
  if (n < 2) return;
  reverse_kernel<<<grid_for(n / 2), kThreads, 0, s>>>(x, n);
  ASTERIA_CUDA_CHECK(cudaGetLastError());
}

class CudaShardVectorOps final : public ShardVectorOps {
 public:
  void add(float* acc, const float* x, size_t n) override {
    if (n == 0) return;
    const cudaStream_t s = own_stream();
    add_kernel<<<grid_for(n), kThreads, 0, s>>>(acc, x, n);
    ASTERIA_CUDA_CHECK(cudaGetLastError());
    ASTERIA_CUDA_CHECK(cudaStreamSynchronize(s));
  }
  // Three reversals: rotate(x, first) = reverse(reverse(x[0, first)) reverse(x[first, n))), in
  // place (no whole-layer scratch buffer in device memory).
  void rotate_left(float* x, size_t n, size_t first) override {
    if (first == 0 || first >= n) return;
    const cudaStream_t s = own_stream();
    reverse(x, first, s);
    reverse(x + first, n - first, s);
    reverse(x, n, s);
    ASTERIA_CUDA_CHECK(cudaStreamSynchronize(s));
  }
  void scale_to_mean(float* x, size_t n, int world) override { cuda::scale_to_mean(x, n, world); }
  double sum_of_squares(const float* x, size_t n) override { return cuda::sum_of_squares(x, n); }
};

}  // namespace

std::unique_ptr<ShardVectorOps> make_cuda_shard_vector_ops() { return std::make_unique<CudaShardVectorOps>(); }

}  // namespace asteria
