// bf16 storage on the CPU (contract: ops/bf16_storage.hpp), with core/bf16.hpp's rounding.
#include "model/ops/bf16_storage.hpp"

#include <cstring>

#include "core/bf16.hpp"
#include "model/ops/parallel.hpp"

namespace asteria::ops {

namespace {

// to_bf16's bits without its branch, so that the loops below vectorize (the packing runs on
// every GEMM operand of runtime.precision bf16): the same rounding, the same quiet NaN.
inline uint16_t bf16_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  const uint32_t quiet_nan = (u >> 16) | 0x40u;
  return static_cast<uint16_t>((u & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded);
}

}  // namespace

void pack_bf16(uint16_t* dst, const float* src, size_t n) {
#pragma omp parallel for simd schedule(static) if (worth_parallel(n))
  for (size_t i = 0; i < n; i++) dst[i] = bf16_bits(src[i]);
}

void unpack_bf16(float* dst, const uint16_t* src, size_t n) {
#pragma omp parallel for simd schedule(static) if (worth_parallel(n))
  for (size_t i = 0; i < n; i++) dst[i] = to_float(bf16{src[i]});
}

void round_to_bf16(float* dst, const float* src, size_t n) {
#pragma omp parallel for simd schedule(static) if (worth_parallel(n))
  for (size_t i = 0; i < n; i++) dst[i] = to_float(bf16{bf16_bits(src[i])});
}

}  // namespace asteria::ops
