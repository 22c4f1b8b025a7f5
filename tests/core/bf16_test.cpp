// Host bfloat16 conversion against hand-computed bit patterns: exact values, round to nearest
// with ties to even, overflow to infinity, NaN kept.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "core/bf16.hpp"

namespace asteria {
namespace {

TEST(Bf16, RoundsToNearestEven) {
  EXPECT_EQ(to_bf16(1.0f).bits, 0x3f80);
  EXPECT_EQ(to_bf16(-2.0f).bits, 0xc000);
  // 1 + 2^-8 lies halfway between 1 (0x3f80, even) and 1 + 2^-7 (0x3f81): ties go to even.
  EXPECT_EQ(to_bf16(1.0f + 1.0f / 256).bits, 0x3f80);
  // 1 + 3 * 2^-8 lies halfway between 0x3f81 (odd) and 0x3f82 (even).
  EXPECT_EQ(to_bf16(1.0f + 3.0f / 256).bits, 0x3f82);
  // Just above the halfway point rounds up.
  EXPECT_EQ(to_bf16(std::nextafter(1.0f + 1.0f / 256, 2.0f)).bits, 0x3f81);
  EXPECT_EQ(to_float(to_bf16(3.140625f)), 3.140625f);   // representable: exact
}

TEST(Bf16, OverflowAndNaN) {
  EXPECT_TRUE(std::isinf(to_float(to_bf16(std::numeric_limits<float>::max()))));
  EXPECT_TRUE(std::isnan(to_float(to_bf16(std::numeric_limits<float>::quiet_NaN()))));
  // A NaN whose payload is only in the low 16 bits must not become infinity.
  uint32_t u = 0x7f800001u;
  float f;
  std::memcpy(&f, &u, sizeof f);
  EXPECT_TRUE(std::isnan(to_float(to_bf16(f))));
}

}  // namespace
}  // namespace asteria
