#include "train/lr_schedule.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace asteria {

double lr_at(int64_t step, double base_lr, const TrainConfig& t) {
  if (t.warmup_steps > 0 && step <= t.warmup_steps)
    return base_lr * static_cast<double>(step) / static_cast<double>(t.warmup_steps);
  if (t.schedule == ScheduleKind::Constant) return base_lr;
  const double floor = base_lr * t.final_lr_fraction;
  const int64_t decay_steps = t.steps - t.warmup_steps;
  if (decay_steps <= 0) return base_lr;
  // Progress through the decay: 0 just after warmup, 1 at the last step.
  double x = std::clamp(static_cast<double>(step - t.warmup_steps) / static_cast<double>(decay_steps),
                        0.0, 1.0);
  if (t.schedule == ScheduleKind::Linear) return floor + (base_lr - floor) * (1.0 - x);
  return floor + (base_lr - floor) * 0.5 * (1.0 + std::cos(std::numbers::pi * x));
}

}  // namespace asteria
