#pragma once
// bfloat16 on the host: the storage type of the CUDA backend's parameters and activations
// (docs/DESIGN.md "Precision"), laid out as CUDA's __nv_bfloat16 (the top 16 bits of an fp32).
// Conversion rounds to nearest, ties to even, and keeps NaN a NaN.
#include <cstdint>
#include <cstring>

namespace asteria {

struct bf16 {
  uint16_t bits = 0;
};

// Without a branch, so that loops over it vectorize (ops/cpu/bf16_storage.cpp packs every GEMM
// operand of runtime.precision bf16 with it).
inline bf16 to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  const uint32_t quiet_nan = (u >> 16) | 0x40u;
  return bf16{static_cast<uint16_t>((u & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded)};
}

inline float to_float(bf16 h) {
  const uint32_t u = static_cast<uint32_t>(h.bits) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

}  // namespace asteria
