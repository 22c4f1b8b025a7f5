#pragma once
// oneDNN's GEMMs, as core/cpu/gemm.cpp calls them (the routing is gemm_routing.hpp's).
//   onednn_sgemm: dnnl_sgemm, oneDNN's BLAS-like fp32 GEMM (row-major; its JIT kernels are
//     generated once per process and kept).
//   onednn_gemm_bf16: a matmul primitive over bf16 operands with an fp32 result, one per shape,
//     transposes, strides, alpha and beta, created on a thread's first call with that key and kept
//     in the thread's cache (the model's shapes are a handful, so every primitive is made in the
//     first step and reused after), with its scratchpad allocated once beside it.
// Both throw asteria::Error naming the call when oneDNN refuses it.
#include <cstdint>
#include <string>

#include "core/cpu/gemm_routing.hpp"

namespace asteria::cpu {

OneDnnIsa onednn_isa();
std::string onednn_version();

void onednn_sgemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A, int lda,
                  const float* B, int ldb, float beta, float* C, int ldc);

void onednn_gemm_bf16(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const uint16_t* A, int lda,
                      const uint16_t* B, int ldb, float beta, float* C, int ldc);

}  // namespace asteria::cpu
