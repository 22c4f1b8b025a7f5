#pragma once
// Token embedding: a row lookup. Backward scatters rows back (tokens may repeat).
#include <cstdint>

namespace asteria::ops {

// out[N, C] = wte[tokens[n], :]            wte [E, C], tokens [N] (each < E)
template <class T>
void embedding_forward(T* out, const int32_t* tokens, const T* wte, int N, int C);

// dwte[tokens[n], :] += scale * dout[n, :]  dwte [E, C], dout [N, C]
// Threads split the columns, so repeated tokens never race.
template <class T>
void embedding_backward(T* dwte, const int32_t* tokens, const T* dout, int N, int C, T scale);

// The CUDA backend's op (ops/cuda/embedding.cu): the same contract on device pointers, queued on
// the calling thread's current stream (core/cuda/cuda_context.hpp). Defined for float in builds
// with the CUDA backend.
namespace cuda {

template <class T>
void embedding_forward(T* out, const int32_t* tokens, const T* wte, int N, int C);

template <class T>
void embedding_backward(T* dwte, const int32_t* tokens, const T* dout, int N, int C, T scale);

}  // namespace cuda

}  // namespace asteria::ops
