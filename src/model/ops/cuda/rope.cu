// RoPE on CUDA, in place: one thread per rotated pair (contract: ops/rope.hpp). The tables are
// made on the host (rope_tables) and copied to the device once per model.
#include "model/ops/cuda/kernel_util.cuh"
#include "model/ops/rope.hpp"

namespace asteria::ops::cuda {

using namespace cuda_detail;

namespace {

__global__ void rotate_kernel(float* x, int ld, int N, int seq_len, int n_heads, int head_dim, const float* cos_table,
                              const float* sin_table, float sign) {
  const int half = head_dim / 2;
  const size_t pairs = static_cast<size_t>(N) * n_heads * half;
  const size_t id = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (id >= pairs) return;
  const int i = static_cast<int>(id % half);
  const int h = static_cast<int>((id / half) % n_heads);
  const int n = static_cast<int>(id / (static_cast<size_t>(half) * n_heads));
  const int t = n % seq_len;
  float* a = x + static_cast<size_t>(n) * ld + static_cast<size_t>(h) * head_dim;
  const float c = cos_table[static_cast<size_t>(t) * half + i], s = sign * sin_table[static_cast<size_t>(t) * half + i];
  const float xa = a[i], xb = a[i + half];
  a[i] = xa * c - xb * s;
  a[i + half] = xb * c + xa * s;
}

void rotate(float* x, int ld, int N, int seq_len, int n_heads, int head_dim, const float* cos_table,
            const float* sin_table, float sign) {
  const size_t pairs = static_cast<size_t>(N) * n_heads * (head_dim / 2);
  if (pairs == 0) return;
  rotate_kernel<<<blocks_for(pairs, 256), 256, 0, asteria::cuda::current_stream()>>>(x, ld, N, seq_len, n_heads, head_dim,
                                                                                      cos_table, sin_table, sign);
  ASTERIA_CUDA_LAUNCH_CHECK();
}

}  // namespace

template <>
void rope_forward<float>(float* x, int ld, int N, int seq_len, int n_heads, int head_dim, const float* cos_table,
                         const float* sin_table) {
  rotate(x, ld, N, seq_len, n_heads, head_dim, cos_table, sin_table, 1.0f);
}

template <>
void rope_backward<float>(float* dx, int ld, int N, int seq_len, int n_heads, int head_dim, const float* cos_table,
                          const float* sin_table) {
  rotate(dx, ld, N, seq_len, n_heads, head_dim, cos_table, sin_table, -1.0f);
}

}  // namespace asteria::ops::cuda
