#pragma once
// exp() that the compiler can vectorize. std::exp on float is a libm call per element, which
// keeps softmax and cross-entropy loops scalar; this one is branch-free arithmetic, so a loop
// over it becomes AVX2 code. Relative error is below 2e-7 over the range that matters
// (x in [-87, 88]; smaller x flushes to 0-ish, larger saturates at exp(88)).
// The double overload is exact std::exp: fp64 exists for finite-difference checks, not speed.
#include <cmath>
#include <cstdint>
#include <cstring>

namespace asteria::ops {

inline float fast_exp(float x) {
  // exp(x) = 2^n * exp(r), n = round(x / ln2), r = x - n ln2 in [-ln2/2, ln2/2].
  x = x < -87.0f ? -87.0f : x;
  x = x > 88.0f ? 88.0f : x;
  // Round to nearest by adding and removing 1.5 * 2^23 (exact in float, vectorizes everywhere).
  const float n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  // Cody-Waite split of ln2 so that n * ln2_hi is exact in float.
  const float r = (x - n * 0.693359375f) + n * 2.12194440e-4f;
  // Taylor series of exp(r) to degree 7 (|r| <= 0.347: truncation error < 1e-8).
  float p = 1.0f / 5040.0f;
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  // Scale by 2^n by adding n to the exponent bits.
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return p * scale;
}

inline double fast_exp(double x) { return std::exp(x); }

}  // namespace asteria::ops
