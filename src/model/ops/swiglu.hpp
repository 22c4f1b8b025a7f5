#pragma once
// SwiGLU activation of OLMo: the fused up projection's output [N, 2F] is chunked as (x, gate)
// (first F columns x, last F columns gate), and act = x * silu(gate), silu(g) = g * sigmoid(g).

namespace asteria::ops {

// out[N, F] = inp[:, 0:F] * silu(inp[:, F:2F])     inp [N, 2F]
template <class T>
void swiglu_forward(T* out, const T* inp, int N, int F);

// dinp[N, 2F] (overwritten) from dout[N, F] and the forward input inp[N, 2F].
template <class T>
void swiglu_backward(T* dinp, const T* dout, const T* inp, int N, int F);

// The CUDA backend's op (ops/cuda/swiglu.cu): the same contract on device pointers, queued on
// the calling thread's current stream (core/cuda/cuda_context.hpp). Defined for float in builds
// with the CUDA backend.
namespace cuda {

template <class T>
void swiglu_forward(T* out, const T* inp, int N, int F);

template <class T>
void swiglu_backward(T* dinp, const T* dout, const T* inp, int N, int F);

}  // namespace cuda

}  // namespace asteria::ops
