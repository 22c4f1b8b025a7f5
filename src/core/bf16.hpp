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

inline bf16 to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u) return bf16{static_cast<uint16_t>((u >> 16) | 0x40u)};   // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return bf16{static_cast<uint16_t>(u >> 16)};
}

inline float to_float(bf16 h) {
  const uint32_t u = static_cast<uint32_t>(h.bits) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

}  // namespace asteria
