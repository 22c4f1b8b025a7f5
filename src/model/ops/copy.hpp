#pragma once
// Copies inside a backend's memory: a contiguous range, and a column range of row-strided
// matrices (the V third of a qkv row). Separate ops so that layers never call memcpy or
// cudaMemcpy themselves.
#include <cstddef>

namespace asteria::ops {

// dst[0, n) = src[0, n)        (no overlap)
template <class T>
void copy(T* dst, const T* src, size_t n);

// dst[r * ld_dst + c] = src[r * ld_src + c] for r < rows, c < cols
template <class T>
void copy_columns(T* dst, int ld_dst, const T* src, int ld_src, int rows, int cols);

// The CUDA backend's op (ops/cuda/copy.cu): the same contract on device pointers, queued on the
// calling thread's current stream (core/cuda/cuda_context.hpp). Defined for float in builds with
// the CUDA backend.
namespace cuda {

template <class T>
void copy(T* dst, const T* src, size_t n);

template <class T>
void copy_columns(T* dst, int ld_dst, const T* src, int ld_src, int rows, int cols);

}  // namespace cuda

}  // namespace asteria::ops
