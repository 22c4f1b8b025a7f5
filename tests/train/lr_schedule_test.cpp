#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "train/lr_schedule.hpp"

using namespace asteria;

TEST(LrSchedule, WarmupThenCosineToFloor) {
  TrainConfig t;
  t.steps = 110;
  t.warmup_steps = 10;
  t.schedule = ScheduleKind::Cosine;
  t.final_lr_fraction = 0.1;
  EXPECT_DOUBLE_EQ(lr_at(1, 1.0, t), 0.1);
  EXPECT_DOUBLE_EQ(lr_at(5, 1.0, t), 0.5);
  EXPECT_DOUBLE_EQ(lr_at(10, 1.0, t), 1.0);
  // Halfway through the decay the cosine is at the midpoint between peak and floor.
  EXPECT_NEAR(lr_at(60, 1.0, t), 0.55, 1e-12);
  EXPECT_NEAR(lr_at(35, 1.0, t), 0.1 + 0.9 * 0.5 * (1 + std::cos(std::numbers::pi * 0.25)), 1e-12);
  EXPECT_NEAR(lr_at(110, 1.0, t), 0.1, 1e-12);
}

TEST(LrSchedule, LinearAndConstant) {
  TrainConfig t;
  t.steps = 100;
  t.warmup_steps = 0;
  t.schedule = ScheduleKind::Linear;
  t.final_lr_fraction = 0.0;
  EXPECT_NEAR(lr_at(50, 2.0, t), 1.0, 1e-12);
  EXPECT_NEAR(lr_at(100, 2.0, t), 0.0, 1e-12);
  t.schedule = ScheduleKind::Constant;
  EXPECT_DOUBLE_EQ(lr_at(77, 2.0, t), 2.0);
}
