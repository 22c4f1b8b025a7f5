#pragma once
// Small dense helpers of the block preconditioners (fp32 state, row-major, contiguous).
#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "core/cpu/gemm.hpp"

namespace asteria::blockmath {

// C (m x n) = alpha * op(A) * op(B) + beta * C for contiguous row-major operands.
inline void mul(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* A,
                const float* B, float beta, float* C) {
  cpu::gemm(ta, tb, static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), alpha, A,
            static_cast<int>(ta ? m : k), B, static_cast<int>(tb ? k : n), beta, C, static_cast<int>(n));
}

// Factor statistics of G (m x n): L = beta L + scale G G^T and R = beta R + scale G^T G.
// SYRK computes one triangle (half the flops of a GEMM; measured 0.6x its time at n = 1024
// with the mirroring) and the other is mirrored, since the refreshes read L and R whole.
// The mirror goes in 8 x 8 tiles: row by row it reads the upper triangle a column at a time, a
// 4 KiB stride at n = 1024 (1.5 ms there, 0.24 ms in tiles: a third of the SYRK's time before).
inline void mirror_upper(float* S, int64_t order) {
  constexpr int64_t kTile = 8;
  for (int64_t i0 = 0; i0 < order; i0 += kTile)
    for (int64_t j0 = 0; j0 <= i0; j0 += kTile)
      for (int64_t i = i0; i < std::min(i0 + kTile, order); ++i)
        for (int64_t j = j0; j < std::min(j0 + kTile, i); ++j) S[i * order + j] = S[j * order + i];
}
inline void sym_rank_k(bool trans, int64_t order, int64_t k, const float* G, float beta, float scale, float* S) {
  const int n = static_cast<int>(order);
  cblas_ssyrk(CblasRowMajor, CblasUpper, trans ? CblasTrans : CblasNoTrans, n, static_cast<int>(k), scale, G,
              trans ? n : static_cast<int>(k), beta, S, n);
  mirror_upper(S, order);
}
inline void accumulate_left(const float* G, int64_t m, int64_t n, float beta, float scale, float* L) {
  sym_rank_k(false, m, n, G, beta, scale, L);
}
inline void accumulate_right(const float* G, int64_t m, int64_t n, float beta, float scale, float* R) {
  sym_rank_k(true, n, m, G, beta, scale, R);
}

// out = Q_L^T X Q_R (to the eigenbasis) and out = Q_L X Q_R^T (back); tmp is m x n.
inline void to_basis(const float* QL, const float* X, const float* QR, int64_t m, int64_t n, float* tmp, float* out) {
  mul(true, false, m, n, m, 1.0f, QL, X, 0.0f, tmp);
  mul(false, false, m, n, n, 1.0f, tmp, QR, 0.0f, out);
}
inline void from_basis(const float* QL, const float* X, const float* QR, int64_t m, int64_t n, float* tmp, float* out) {
  mul(false, false, m, n, m, 1.0f, QL, X, 0.0f, tmp);
  mul(false, true, m, n, n, 1.0f, tmp, QR, 0.0f, out);
}

// SOAP's Adam in the eigenbasis, over mn entries: M = b1 M + a1 G; V = b2 V + a2 G^2; then
// G <- M / (sqrt(V) + eps), the direction in the eigenbasis.
inline void soap_moments(float* M, float* V, float* G, int64_t mn, float b1, float b2, float a1, float a2, float eps) {
  for (int64_t i = 0; i < mn; ++i) {
    M[i] = b1 * M[i] + a1 * G[i];
    V[i] = b2 * V[i] + a2 * G[i] * G[i];
    G[i] = M[i] / (std::sqrt(V[i]) + eps);
  }
}

// The same helpers on device pointers, on the calling thread's current stream
// (optim/cuda/block_math.cu; builds with CUDA only), for the second-order optimizers' per-step
// work on the GPU. Same operations; GEMM and SYRK round in their own order.
namespace cuda {
void accumulate_left(const float* G, int64_t m, int64_t n, float beta, float scale, float* L);
void accumulate_right(const float* G, int64_t m, int64_t n, float beta, float scale, float* R);
void to_basis(const float* QL, const float* X, const float* QR, int64_t m, int64_t n, float* tmp, float* out);
void from_basis(const float* QL, const float* X, const float* QR, int64_t m, int64_t n, float* tmp, float* out);
void soap_moments(float* M, float* V, float* G, int64_t mn, float b1, float b2, float a1, float a2, float eps);
}  // namespace cuda

// 1 - beta in double, rounded once: 1.0f - float(beta) is 1.3e-5 off at beta = 0.999.
inline float one_minus(double beta) { return static_cast<float>(1.0 - beta); }

inline void to_double(int64_t count, const float* x, double* y) {
  for (int64_t i = 0; i < count; ++i) y[i] = x[i];
}
inline void to_float(int64_t count, const double* x, float* y) {
  for (int64_t i = 0; i < count; ++i) y[i] = static_cast<float>(x[i]);
}

}  // namespace asteria::blockmath
