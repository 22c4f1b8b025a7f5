#pragma once
// Rotary position embedding, rotate-half (NeoX) convention as OLMo uses it: inside each head of
// size hd, element i is paired with i + hd/2 (i < hd/2) and the pair is rotated by the angle
// t * theta^(-2i/hd) at position t:
//   x'[i]        = x[i] cos - x[i + hd/2] sin
//   x'[i + hd/2] = x[i + hd/2] cos + x[i] sin
// The rotation is orthogonal, so backward rotates the gradient by the negative angle.

namespace asteria::ops {

// cos[T, hd/2], sin[T, hd/2] for positions 0..T-1. Computed in double, once per model.
template <class T>
void rope_tables(T* cos_table, T* sin_table, int seq_len, int head_dim, double theta);

// Rotates, in place, n_heads consecutive heads at the start of every row of x.
// x: N = B * T rows with row stride ld; a row's position is its index modulo seq_len.
// For a fused qkv row [q | k | v] pass n_heads = 2 * heads to rotate q and k together.
template <class T>
void rope_forward(T* x, int ld, int N, int seq_len, int n_heads, int head_dim, const T* cos_table,
                  const T* sin_table);

// dx (in place, same layout) = dL/dx given dL/dx' (the transpose rotation).
template <class T>
void rope_backward(T* dx, int ld, int N, int seq_len, int n_heads, int head_dim,
                   const T* cos_table, const T* sin_table);

// The CUDA backend's op (ops/cuda/rope.cu): the same contract on device pointers, queued on
// the calling thread's current stream (core/cuda/cuda_context.hpp). Defined for float in builds
// with the CUDA backend.
namespace cuda {

template <class T>
void rope_forward(T* x, int ld, int N, int seq_len, int n_heads, int head_dim, const T* cos_table,
                  const T* sin_table);

template <class T>
void rope_backward(T* dx, int ld, int N, int seq_len, int n_heads, int head_dim,
                   const T* cos_table, const T* sin_table);

}  // namespace cuda

}  // namespace asteria::ops
