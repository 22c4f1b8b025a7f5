#pragma once
// Learning rate at a 1-based step: linear warmup from lr/warmup to lr over `warmup_steps`,
// then decay to lr * final_lr_fraction at `steps` (cosine or linear), or constant.
#include <cstdint>

#include "config/config.hpp"

namespace asteria {

double lr_at(int64_t step, double base_lr, const TrainConfig& t);

}  // namespace asteria
