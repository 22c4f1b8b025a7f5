#pragma once
// The tiered state manager's settings resolved from the config (runtime.tiers).
#include <string>
#include <vector>

#include "fsdp/param_offload.hpp"
#include "model/param_table.hpp"

#include "runtime/tier_layout.hpp"
#include "config/config.hpp"

namespace asteria {

TierOptions tier_options(const Config& cfg);
// The disk tier's file of this process: <runtime.tiers.disk.path or run.dir/tiers>/state-<pid>.bin,
// state-<pid>.<name>.bin for another (`name`: the n-th re-placement's file, its spill file).
std::string disk_tier_file(const Config& cfg, const std::string& name = "");
// runtime.tiers.params resolved (fsdp/param_offload.hpp): per layer of the model, whether its
// parameters live on the disk tier (home disk: every block; the embedding and the head stay in
// memory), all false with home memory; the whole-layer buffers of the offloaded layers in flight;
// and the bytes they take in memory (the kept layers, the buffers) and on disk.
std::vector<bool> params_on_disk(const Config& cfg);
int params_buffers(const Config& cfg);
ParamOffloadBytes params_bytes(const Config& cfg);
// Refuses, naming the keys, parameters on the disk tier in a launch that cannot have them: the
// CUDA backend (its parameters live in device memory) and several ranks (a sharded rank's layers
// come from its shards; replicas would each read and write their own copy).
void check_params_home(const Config& cfg, int world);
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
