#pragma once
// bf16 storage of activations (runtime.precision bf16, model.hpp): what a block keeps for its
// backward is held as bf16 (the top 16 bits of an fp32, core/bf16.hpp) and widened back before
// the backward reads it. Rounding is to nearest, ties to even, NaN kept a NaN, on every backend,
// so round_to_bf16 followed by the backward equals pack_bf16 + unpack_bf16 bit for bit.

#include <cstddef>
#include <cstdint>

namespace asteria::ops {

// dst[i] = bf16 bits of src[i], rounded                     dst [n], src [n]
void pack_bf16(uint16_t* dst, const float* src, size_t n);
// dst[i] = the fp32 value of the bf16 bits src[i] (exact)
void unpack_bf16(float* dst, const uint16_t* src, size_t n);
// dst[i] = the fp32 value of src[i] rounded to bf16 (what pack + unpack would give); dst may be src
void round_to_bf16(float* dst, const float* src, size_t n);

// The CUDA backend's ops (ops/cuda/bf16_storage.cu): the same contract on device pointers,
// queued on the calling thread's current stream. Defined in builds with the CUDA backend.
namespace cuda {

void pack_bf16(uint16_t* dst, const float* src, size_t n);
void unpack_bf16(float* dst, const uint16_t* src, size_t n);
void round_to_bf16(float* dst, const float* src, size_t n);

}  // namespace cuda

}  // namespace asteria::ops
