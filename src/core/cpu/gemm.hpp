#pragma once
// GEMM of the CPU backend: row-major C = alpha * op(A) * op(B) + beta * C.
// op(A) is M x K, op(B) is K x N, C is M x N; lda/ldb/ldc are row strides in elements, so a
// strided view (one head inside a fused QKV row) is passed without a copy.
//
// float trains: each call goes to oneDNN or OpenBLAS by the process's routing (runtime.gemm,
// core/cpu/gemm_routing.hpp). double exists so that every layer can be checked by finite
// differences in fp64; it is always OpenBLAS. gemm_bf16 takes bf16 operands (the top 16 bits
// of an fp32, core/bf16.hpp) and accumulates in fp32 on the CPU's bf16 instructions
// (runtime.precision bf16; only where bf16_gemm_available()).
//
// Called from inside an OpenMP region, a GEMM runs on the calling thread alone; outside one it
// uses the calling thread's OpenMP team (runtime.threads). For a fixed thread count the results'
// bits do not change from call to call.
#include <cstdint>

namespace asteria::cpu {

void gemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A, int lda, const float* B,
          int ldb, float beta, float* C, int ldc);

void gemm(bool trans_a, bool trans_b, int M, int N, int K, double alpha, const double* A, int lda,
          const double* B, int ldb, double beta, double* C, int ldc);

// Whether gemm_bf16 runs here: oneDNN's bf16 kernels on a CPU with AVX512-BF16 (or AMX), and the
// routing not pinned to OpenBLAS. Where it is false, callers round their operands to bf16 and
// call the fp32 gemm: the same products (a product of two bf16 values is exact in fp32) and the
// same fp32 accumulation, at fp32 speed.
bool bf16_gemm_available();

void gemm_bf16(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const uint16_t* A, int lda,
               const uint16_t* B, int ldb, float beta, float* C, int ldc);

}  // namespace asteria::cpu
