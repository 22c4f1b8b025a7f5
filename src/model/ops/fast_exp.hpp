#pragma once
// exp() that the compiler can vectorize. std::exp on float is a libm call per element, which
// keeps softmax, SwiGLU and cross-entropy loops scalar; this one is branch-free arithmetic, so
// a loop over it becomes AVX2 code. Relative error is below 3e-7 for x in [-87, 88]; below
// that it returns 0 (or a denormal-free tiny value), above it +inf, like a float exp would.
// (Exact only for |x| < 1e7; far beyond, the range reduction loses meaning. Softmax inputs
// x - max are never that large unless training has already diverged.)
// The double overload is exact std::exp: fp64 exists for finite-difference checks, not speed.
#include <cmath>
#include <cstdint>
#include <cstring>

namespace asteria::ops {

inline float fast_exp(float x) {
  // exp(x) = 2^n * exp(r), n = round(x / ln2), r = x - n ln2 in [-ln2/2, ln2/2].
  // Round to nearest by adding and removing 1.5 * 2^23 (exact, vectorizes everywhere).
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
  // Scale by 2^n through the exponent bits. The clamp is done on the integer (a float
  // compare-and-select before the arithmetic would stop GCC from vectorizing under the default
  // -ftrapping-math): n <= -127 gives scale 0, n >= 128 gives +inf.
  int32_t ni = static_cast<int32_t>(n);
  ni = ni < -127 ? -127 : ni;
  ni = ni > 128 ? 128 : ni;
  const int32_t bits = (ni + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return p * scale;
}

inline double fast_exp(double x) { return std::exp(x); }

}  // namespace asteria::ops
