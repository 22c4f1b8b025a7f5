#pragma once
// GEMM of the CPU backend: row-major C = alpha * op(A) * op(B) + beta * C over OpenBLAS.
// op(A) is M x K, op(B) is K x N, C is M x N; lda/ldb/ldc are row strides in elements, so a
// strided view (one head inside a fused QKV row) is passed without a copy.
// float trains; double exists so that every layer can be checked by finite differences in fp64.
#include <cblas.h>

namespace asteria::cpu {

inline void gemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A,
                 int lda, const float* B, int ldb, float beta, float* C, int ldc) {
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
              trans_b ? CblasTrans : CblasNoTrans, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

inline void gemm(bool trans_a, bool trans_b, int M, int N, int K, double alpha, const double* A,
                 int lda, const double* B, int ldb, double beta, double* C, int ldc) {
  cblas_dgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
              trans_b ? CblasTrans : CblasNoTrans, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

}  // namespace asteria::cpu
