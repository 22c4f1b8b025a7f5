// The NVML energy counter: where there is none (no driver), it says why and reads nothing;
// where there is one, it never runs backwards.
#include <gtest/gtest.h>

#include "core/nvml_energy.hpp"

namespace asteria {
namespace {

TEST(NvmlEnergy, ReadsOrSaysWhyNot) {
  NvmlEnergy e(0);
  if (!e.available()) {
    EXPECT_FALSE(e.why_not().empty());
    EXPECT_FALSE(e.joules().has_value());
    return;
  }
  const auto a = e.joules(), b = e.joules();
  ASSERT_TRUE(a && b);
  EXPECT_GE(*b, *a);
}

}  // namespace
}  // namespace asteria
