// Causal attention on CUDA, the unfused reference (contract: ops/attention.hpp): per batch row,
// strided batched GEMMs over the heads of the fused qkv buffer (no copies), a masked softmax
// kernel over the whole [T, T] rows (0 above the diagonal), and the same products backward.
// It keeps the [B, NH, T, T] probabilities, as the CPU kernel does; it is the check for a fast
// path that does not, not the path to train with at T = 2048.
#include <cmath>

#include "core/cuda/cublaslt_gemm.hpp"
#include "model/ops/attention.hpp"
#include "model/ops/cuda/kernel_util.cuh"

namespace asteria::ops::cuda {

using namespace cuda_detail;

namespace {

constexpr int kThreads = 256;

// Rows of [T, T] score matrices, row r at position t = r % T: softmax over keys j <= t in place,
// 0 for j > t.
__global__ void causal_softmax_kernel(float* s, int Tn) {
  __shared__ float shared[kWarp];
  const int t = blockIdx.x % Tn;
  float* row = s + static_cast<size_t>(blockIdx.x) * Tn;
  float mx = -INFINITY;
  for (int j = threadIdx.x; j <= t; j += blockDim.x) mx = fmaxf(mx, row[j]);
  mx = block_reduce<true>(mx, shared);
  float sum = 0;
  for (int j = threadIdx.x; j <= t; j += blockDim.x) {
    const float e = expf(row[j] - mx);
    row[j] = e;
    sum += e;
  }
  const float inv = 1.0f / block_reduce<false>(sum, shared);
  for (int j = threadIdx.x; j < Tn; j += blockDim.x) row[j] = j <= t ? row[j] * inv : 0.0f;
}

// ds holds dL/dP on entry, dL/dS on exit: P * (dP - sum_j P dP), 0 for j > t.
__global__ void causal_softmax_backward_kernel(const float* p, float* ds, int Tn) {
  __shared__ float shared[kWarp];
  const int t = blockIdx.x % Tn;
  const float* prow = p + static_cast<size_t>(blockIdx.x) * Tn;
  float* drow = ds + static_cast<size_t>(blockIdx.x) * Tn;
  float dot = 0;
  for (int j = threadIdx.x; j <= t; j += blockDim.x) dot += prow[j] * drow[j];
  dot = block_reduce<false>(dot, shared);
  for (int j = threadIdx.x; j < Tn; j += blockDim.x) drow[j] = j <= t ? prow[j] * (drow[j] - dot) : 0.0f;
}

// heads batched products of head-strided views: op(A_h) op(B_h) for h in [0, heads).
void head_gemm(bool ta, bool tb, int m, int n, int k, float alpha, const float* a, int lda, int64_t sa,
               const float* b, int ldb, int64_t sb, float* c, int ldc, int64_t sc, int heads) {
  asteria::cuda::gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, 0.0f, c, ldc, heads, sa, sb, sc);
}

}  // namespace

template <>
void attention_forward<float>(float* out, float* att, const float* qkv, int B, int Tn, int C, int NH) {
  const int hd = C / NH, ld = 3 * C;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const int64_t TT = static_cast<int64_t>(Tn) * Tn;
  for (int b = 0; b < B; b++) {
    const float* q = qkv + static_cast<size_t>(b) * Tn * ld;
    float* p = att + static_cast<size_t>(b) * NH * TT;
    head_gemm(false, true, Tn, Tn, hd, scale, q, ld, hd, q + C, ld, hd, p, Tn, TT, NH);   // S = scale Q K^T
    causal_softmax_kernel<<<NH * Tn, kThreads, 0, asteria::cuda::current_stream()>>>(p, Tn);
    ASTERIA_CUDA_LAUNCH_CHECK();
    head_gemm(false, false, Tn, hd, Tn, 1.0f, p, Tn, TT, q + 2 * C, ld, hd, out + static_cast<size_t>(b) * Tn * C, C,
              hd, NH);   // out = P V
  }
}

template <>
void attention_backward<float>(float* dqkv, float* scratch, int n_scratch, const float* dout, const float* qkv,
                               const float* att, int B, int Tn, int C, int NH) {
  const int hd = C / NH, ld = 3 * C;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const int64_t TT = static_cast<int64_t>(Tn) * Tn;
  const int group = n_scratch < NH ? n_scratch : NH;   // heads per batched product: one [T, T] slab each
  ASTERIA_CHECK(group >= 1, "attention_backward needs at least one [T, T] scratch slab");
  cudaStream_t s = asteria::cuda::current_stream();
  for (int b = 0; b < B; b++)
    for (int h0 = 0; h0 < NH; h0 += group) {
      const int heads = NH - h0 < group ? NH - h0 : group;
      const size_t off = static_cast<size_t>(b) * Tn * ld + static_cast<size_t>(h0) * hd;
      const float* q = qkv + off;
      float* dq = dqkv + off;
      const float* p = att + (static_cast<size_t>(b) * NH + h0) * TT;
      const float* dO = dout + static_cast<size_t>(b) * Tn * C + static_cast<size_t>(h0) * hd;
      head_gemm(false, true, Tn, Tn, hd, 1.0f, dO, C, hd, q + 2 * C, ld, hd, scratch, Tn, TT, heads);   // dP = dO V^T
      head_gemm(true, false, Tn, hd, Tn, 1.0f, p, Tn, TT, dO, C, hd, dq + 2 * C, ld, hd, heads);       // dV = P^T dO
      causal_softmax_backward_kernel<<<heads * Tn, kThreads, 0, s>>>(p, scratch, Tn);
      ASTERIA_CUDA_LAUNCH_CHECK();
      head_gemm(false, false, Tn, hd, Tn, scale, scratch, Tn, TT, q + C, ld, hd, dq, ld, hd, heads);   // dQ = s dS K
      head_gemm(true, false, Tn, hd, Tn, scale, scratch, Tn, TT, q, ld, hd, dq + C, ld, hd, heads);    // dK = s dS^T Q
    }
}

}  // namespace asteria::ops::cuda
