#pragma once
// The tiered state manager's settings resolved from the config (runtime.tiers).
#include <string>
#include <vector>

#include "model/param_table.hpp"

#include "runtime/tier_layout.hpp"
#include "config/config.hpp"

namespace asteria {

TierOptions tier_options(const Config& cfg);
// The disk tier's file of this process: <runtime.tiers.disk.path or run.dir/tiers>/state-<pid>.bin,
// state-<pid>.<name>.bin for another (`name`: the n-th re-placement's file, its spill file).
std::string disk_tier_file(const Config& cfg, const std::string& name = "");
// How a layout is checked: Planned, by planning steps until the device cache's moves repeat
// (place_and_plan_states: what a run uses); Quick, placed only (place_states), with all of the
// device budget beyond its homes counted as cache (what the planned layout may keep for the
// cache's fragmentation), so never less memory than Planned: for searches over many budgets.
enum class TierCheck { Planned, Quick };
// The placement of the configured optimizer's state (no optimizer is built); errors are
// prefixed with the config's source.
TierLayout configured_tier_layout(const Config& cfg, TierCheck check = TierCheck::Planned);
// The same for the optimizer of these tables (a rank's shards).
TierLayout configured_tier_layout(const Config& cfg, const std::vector<ParamTable>& tables,
                                  TierCheck check = TierCheck::Planned);

}  // namespace asteria
