#pragma once
// Non-parametric LayerNorm (OLMo-1): no weight, no bias. Rows are normalized to zero mean and
// unit variance: y = (x - mean) * rstd, rstd = 1 / sqrt(var + eps) (biased variance).

namespace asteria::ops {

// out[N, C] = (residual[N, C] if not null) + (inp[N, C] - mean) * rstd
// Saves mean[N] and rstd[N] for backward.
template <class T>
void layernorm_forward(T* out, T* mean, T* rstd, const T* inp, const T* residual, int N, int C,
                       double eps);

// dinp[N, C] (= or +=) dL/dinp given dout[N, C] = dL/dout. dinp may alias dout when
// accumulate is false (each row is read fully before it is written).
template <class T>
void layernorm_backward(T* dinp, const T* dout, const T* inp, const T* mean, const T* rstd, int N,
                        int C, bool accumulate);

// The CUDA backend's op (ops/cuda/layernorm.cu): the same contract on device pointers, queued on
// the calling thread's current stream (core/cuda/cuda_context.hpp). Defined for float in builds
// with the CUDA backend.
namespace cuda {

template <class T>
void layernorm_forward(T* out, T* mean, T* rstd, const T* inp, const T* residual, int N, int C,
                       double eps);

template <class T>
void layernorm_backward(T* dinp, const T* dout, const T* inp, const T* mean, const T* rstd, int N,
                        int C, bool accumulate);

}  // namespace cuda

}  // namespace asteria::ops
