// The block preconditioners' dense helpers on CUDA (contract: optim/block_math.hpp): the basis
// changes as two cuBLASLt products each (fp32, no TF32), the factor statistics as a cuBLAS SYRK of
// one triangle mirrored like the CPU's, SOAP's moments elementwise with round-to-nearest
// intrinsics (no fused multiply-adds, as in the CPU build).
#include "core/cuda/cublaslt_gemm.hpp"
#include "core/cuda/cuda_check.hpp"
#include "core/cuda/cuda_context.hpp"
#include "optim/block_math.hpp"

namespace asteria::blockmath::cuda {

namespace {

using asteria::cuda::current_stream;
using asteria::cuda::gemm;

// Row-major S[i][j] = S[j][i] for j < i: the lower triangle from the upper.
__global__ void mirror_upper_kernel(float* S, int64_t n) {
  const int64_t i = static_cast<int64_t>(blockIdx.y) * blockDim.y + threadIdx.y;
  const int64_t j = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n && j < i) S[i * n + j] = S[j * n + i];
}

// Row-major S (order x order) = beta S + scale op(G) op(G)^T, G row-major with k columns (trans:
// G is k x order and the product is G^T G). In cuBLAS's column-major terms the buffer of S is S
// itself (symmetric) and G's buffer is G^T, so G G^T is a transposed SYRK; the row-major upper
// triangle is the column-major lower one.
void sym_rank_k(bool trans, int64_t order, int64_t k, const float* G, float beta, float scale, float* S) {
  const int n = static_cast<int>(order), kk = static_cast<int>(k);
  ASTERIA_CUBLAS_CHECK(cublasSsyrk(asteria::cuda::thread_cublas(), CUBLAS_FILL_MODE_LOWER, trans ? CUBLAS_OP_N : CUBLAS_OP_T,
                                   n, kk, &scale, G, trans ? n : kk, &beta, S, n));
  const dim3 threads(16, 16), blocks(static_cast<unsigned>((order + 15) / 16), static_cast<unsigned>((order + 15) / 16));
  mirror_upper_kernel<<<blocks, threads, 0, current_stream()>>>(S, order);
  ASTERIA_CUDA_LAUNCH_CHECK();
}

void mul(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* A, const float* B, float* C) {
  gemm(ta, tb, static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), 1.0f, A, static_cast<int>(ta ? m : k), B,
       static_cast<int>(tb ? k : n), 0.0f, C, static_cast<int>(n));
}

__global__ void soap_moments_kernel(float* M, float* V, float* G, int64_t mn, float b1, float b2, float a1, float a2,
                                    float eps) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= mn) return;
  const float g = G[i];
  const float m = __fadd_rn(__fmul_rn(b1, M[i]), __fmul_rn(a1, g));
  const float v = __fadd_rn(__fmul_rn(b2, V[i]), __fmul_rn(__fmul_rn(a2, g), g));
  M[i] = m;
  V[i] = v;
  G[i] = __fdiv_rn(m, __fadd_rn(__fsqrt_rn(v), eps));
}

}  // namespace

void accumulate_left(const float* G, int64_t m, int64_t n, float beta, float scale, float* L) {
  sym_rank_k(false, m, n, G, beta, scale, L);
}
void accumulate_right(const float* G, int64_t m, int64_t n, float beta, float scale, float* R) {
  sym_rank_k(true, n, m, G, beta, scale, R);
}
void to_basis(const float* QL, const float* X, const float* QR, int64_t m, int64_t n, float* tmp, float* out) {
  mul(true, false, m, n, m, QL, X, tmp);
  mul(false, false, m, n, n, tmp, QR, out);
}
void from_basis(const float* QL, const float* X, const float* QR, int64_t m, int64_t n, float* tmp, float* out) {
  mul(false, false, m, n, m, QL, X, tmp);
  mul(false, true, m, n, n, tmp, QR, out);
}
void soap_moments(float* M, float* V, float* G, int64_t mn, float b1, float b2, float a1, float a2, float eps) {
  if (mn == 0) return;
  soap_moments_kernel<<<static_cast<unsigned>((mn + 255) / 256), 256, 0, current_stream()>>>(M, V, G, mn, b1, b2, a1, a2, eps);
  ASTERIA_CUDA_LAUNCH_CHECK();
}

}  // namespace asteria::blockmath::cuda
