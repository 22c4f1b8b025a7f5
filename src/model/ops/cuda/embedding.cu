// Token embedding on CUDA (contract: ops/embedding.hpp). The backward gives each thread one
// column and walks the tokens in order: repeated tokens never race, and the sums are the same
// on every run (atomics would make them depend on timing).
#include "model/ops/cuda/kernel_util.cuh"
#include "model/ops/embedding.hpp"

namespace asteria::ops::cuda {

using namespace cuda_detail;

namespace {

__global__ void embedding_forward_kernel(float* out, const int32_t* tokens, const float* wte, int N, int C) {
  const size_t id = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (id >= static_cast<size_t>(N) * C) return;
  const size_t n = id / C, c = id % C;
  out[id] = wte[static_cast<size_t>(tokens[n]) * C + c];
}

__global__ void embedding_backward_kernel(float* dwte, const int32_t* tokens, const float* dout, int N, int C,
                                          float scale) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= C) return;
  for (int n = 0; n < N; n++) dwte[static_cast<size_t>(tokens[n]) * C + c] += scale * dout[static_cast<size_t>(n) * C + c];
}

}  // namespace

template <>
void embedding_forward<float>(float* out, const int32_t* tokens, const float* wte, int N, int C) {
  const size_t n = static_cast<size_t>(N) * C;
  if (n == 0) return;
  embedding_forward_kernel<<<blocks_for(n, 256), 256, 0, asteria::cuda::current_stream()>>>(out, tokens, wte, N, C);
  ASTERIA_CUDA_LAUNCH_CHECK();
}

template <>
void embedding_backward<float>(float* dwte, const int32_t* tokens, const float* dout, int N, int C, float scale) {
  if (N == 0) return;
  embedding_backward_kernel<<<blocks_for(C, 128), 128, 0, asteria::cuda::current_stream()>>>(dwte, tokens, dout, N, C,
                                                                                              scale);
  ASTERIA_CUDA_LAUNCH_CHECK();
}

}  // namespace asteria::ops::cuda
