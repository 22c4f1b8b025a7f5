#pragma once
// RMSNorm with a weight vector (OLMo-2 norms, QK-norm, and the `pre` placement with RMSNorm):
//   y = x * rstd * w,  rstd = 1 / sqrt(mean(x^2) + eps)
// Row strides are explicit so QK-norm can run over the q or k columns of a fused [N, 3C] row.

namespace asteria::ops {

// out[N, C] (row stride ldo) = (residual (stride ldo) if not null) + inp * rstd * weight
// inp [N, C] with row stride ldi, weight [C]. Saves rstd[N].
template <class T>
void rmsnorm_forward(T* out, int ldo, T* rstd, const T* inp, int ldi, const T* weight,
                     const T* residual, int N, int C, double eps);

// dinp (stride ld_dinp) (= or +=) dL/dinp from dout (stride ld_dout);
// dweight[C] += scale * sum_n dout[n, :] * xhat[n, :].
// dinp may alias dout (same stride) when accumulate is false.
template <class T>
void rmsnorm_backward(T* dinp, int ld_dinp, T* dweight, const T* dout, int ld_dout, const T* inp,
                      int ldi, const T* weight, const T* rstd, int N, int C, T scale,
                      bool accumulate);

// The CUDA backend's op (ops/cuda/rmsnorm.cu): the same contract on device pointers, queued on
// the calling thread's current stream (core/cuda/cuda_context.hpp). Defined for float in builds
// with the CUDA backend.
namespace cuda {

template <class T>
void rmsnorm_forward(T* out, int ldo, T* rstd, const T* inp, int ldi, const T* weight,
                     const T* residual, int N, int C, double eps);

template <class T>
void rmsnorm_backward(T* dinp, int ld_dinp, T* dweight, const T* dout, int ld_dout, const T* inp,
                      int ldi, const T* weight, const T* rstd, int N, int C, T scale,
                      bool accumulate);

}  // namespace cuda

}  // namespace asteria::ops
