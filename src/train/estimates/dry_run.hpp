#pragma once
// The --dry-run report: the resolved config, parameter counts, a memory estimate per component
// (parameters, gradients, optimizer state, activations) and FLOPs per token; with
// distributed.world_size W also the world's global batch, shard map, per-rank memory and comm
// bytes per step (train/estimates/world_plan.hpp). Allocates nothing model-sized, so it works for every
// preset and world size on any machine.
#include <string>

#include "config/config.hpp"

namespace asteria {

std::string dry_run_report(const Config& cfg);

}  // namespace asteria
