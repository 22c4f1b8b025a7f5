// Linear layer on CUDA: the same two GEMMs as the CPU op, through cuBLASLt (contract:
// ops/linear.hpp).
#include "core/cuda/cublaslt_gemm.hpp"
#include "model/ops/cuda/kernel_util.cuh"
#include "model/ops/linear.hpp"

namespace asteria::ops::cuda {

using asteria::cuda::gemm;

template <>
void linear_forward<float>(float* out, const float* inp, const float* weight, int N, int IC, int OC, bool accumulate) {
  gemm(false, true, N, OC, IC, 1.0f, inp, IC, weight, IC, accumulate ? 1.0f : 0.0f, out, OC);
}

template <>
void linear_backward<float>(float* dinp, float* dweight, const float* dout, const float* inp, const float* weight,
                            int N, int IC, int OC, float scale, bool accumulate_dinp) {
  if (dinp) gemm(false, false, N, IC, OC, 1.0f, dout, OC, weight, IC, accumulate_dinp ? 1.0f : 0.0f, dinp, IC);
  gemm(true, false, OC, IC, N, scale, dout, OC, inp, IC, 1.0f, dweight, IC);
}

}  // namespace asteria::ops::cuda
