#pragma once
// Linear layer without bias, PyTorch convention: weight is [out, in] and y = x W^T.
// Both directions are single GEMMs over all N rows, threaded by the GEMM library.
#include <cstdint>

namespace asteria::ops {

// out[N, OC] (= or +=) inp[N, IC] @ weight[OC, IC]^T
// accumulate = true adds into out (a residual stream written in place).
template <class T>
void linear_forward(T* out, const T* inp, const T* weight, int N, int IC, int OC, bool accumulate);

// dinp[N, IC] (= or +=) dout[N, OC] @ weight[OC, IC]    (skipped when dinp is null)
// dweight[OC, IC] += scale * dout^T @ inp[N, IC]
template <class T>
void linear_backward(T* dinp, T* dweight, const T* dout, const T* inp, const T* weight, int N,
                     int IC, int OC, T scale, bool accumulate_dinp);

// The same contract with bf16 operands (runtime.precision bf16): inp, weight and dout are
// rounded to bf16 and the products accumulate in fp32 into the fp32 out / dinp / dweight, as
// autocast does. weight_bf16: the weight's bf16 values made beforehand (the model's copy, made
// once per step), or null: the weight is rounded here; the same values either way. On the CPU
// the operands are packed to bf16 in the calling thread's workspace (grown once, then reused; a
// copy is read in place) and multiplied by oneDNN's bf16 kernels (core/cpu/gemm.hpp
// gemm_bf16) where the CPU has AVX512-BF16; elsewhere they are rounded to fp32 values and the
// GEMM is the fp32 one: a product of two bf16 values is exact in fp32, so the two, and the
// GPU's, differ only in the order of the fp32 sums.
void linear_forward_bf16(float* out, const float* inp, const float* weight, const uint16_t* weight_bf16, int N, int IC,
                         int OC, bool accumulate);
void linear_backward_bf16(float* dinp, float* dweight, const float* dout, const float* inp, const float* weight,
                          const uint16_t* weight_bf16, int N, int IC, int OC, float scale, bool accumulate_dinp);

// The CUDA backend's op (ops/cuda/linear.cu): the same contract on device pointers, queued on
// the calling thread's current stream (core/cuda/cuda_context.hpp). Defined for float in builds
// with the CUDA backend.
namespace cuda {

template <class T>
void linear_forward(T* out, const T* inp, const T* weight, int N, int IC, int OC, bool accumulate);

template <class T>
void linear_backward(T* dinp, T* dweight, const T* dout, const T* inp, const T* weight, int N,
                     int IC, int OC, T scale, bool accumulate_dinp);

// bf16 operands on the tensor cores (the bf16 copies in the calling thread's workspace; a
// weight_bf16 given is read in place).
template <class T>
void linear_forward_bf16(T* out, const T* inp, const T* weight, const uint16_t* weight_bf16, int N, int IC, int OC,
                         bool accumulate);

template <class T>
void linear_backward_bf16(T* dinp, T* dweight, const T* dout, const T* inp, const T* weight, const uint16_t* weight_bf16,
                          int N, int IC, int OC, T scale, bool accumulate_dinp);

}  // namespace cuda

}  // namespace asteria::ops
