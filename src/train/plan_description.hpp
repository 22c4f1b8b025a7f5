#pragma once
// --print-plan: the plan of one step as the trainer would build it, as text, from the config
// alone (no data, no state): the model's and optimizer's ops, the comm lane's for a launch of
// distributed.world_size ranks, the shadow pipeline's from the refresh schedule, the tiers'
// moves (planned from step 1, since they depend on what earlier steps left on the device).
#include <cstdint>
#include <string>

#include "config/config.hpp"

namespace asteria {

std::string describe_step_plan(const Config& cfg, int64_t step);

}  // namespace asteria
