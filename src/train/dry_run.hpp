#pragma once
// The --dry-run report: the resolved config, parameter counts, a memory estimate per component
// (parameters, gradients, optimizer state, activations) and FLOPs per token. Allocates nothing
// model-sized, so it works for every preset on any machine.
#include <string>

#include "train/config.hpp"

namespace asteria {

std::string dry_run_report(const Config& cfg);

}  // namespace asteria
