#pragma once
// GEMM on the device through cuBLASLt: the row-major GemmArgs contract of core/backend.hpp, run
// as the column-major product C^T = op(B)^T op(A)^T. fp32 or bf16 inputs, fp32 or bf16 output,
// always fp32 accumulation (CUBLAS_COMPUTE_32F: no TF32, so fp32 products match the CPU's
// within rounding). A plan (operation and layout descriptors, and the heuristic's algorithm) is
// made once per shape and kept; a 32 MiB workspace is allocated once per stream.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "core/backend.hpp"

namespace asteria::cuda {

// Queues g on stream s (thread-safe). Throws when no algorithm supports the shape.
void lt_gemm(const GemmArgs& g, cudaStream_t s);

// fp32 on the calling thread's current stream, with cpu::gemm's argument order (plus an
// optional strided batch), so that a CUDA op reads like its CPU twin.
void gemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda, const float* b,
          int ldb, float beta, float* c, int ldc, int batch = 1, int64_t stride_a = 0, int64_t stride_b = 0,
          int64_t stride_c = 0);

// The same with bf16 operands and fp32 C (fp32 accumulation).
void gemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const __nv_bfloat16* a, int lda,
          const __nv_bfloat16* b, int ldb, float beta, float* c, int ldc);

// Plans made so far (for tests: a repeated shape makes none).
size_t lt_gemm_plans();

}  // namespace asteria::cuda
