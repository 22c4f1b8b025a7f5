#include "train/tier_config.hpp"

#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include "core/error.hpp"
#include "fsdp/param_offload_plan_ops.hpp"
#include "model/model.hpp"
#include "runtime/tier_planner.hpp"
#include "optim/optimizer_factory.hpp"

namespace asteria {

TierOptions tier_options(const Config& cfg) {
  const TiersConfig& t = cfg.runtime.tiers;
  TierOptions o;
  o.budget = {parse_byte_size(t.device.bytes), parse_byte_size(t.host.bytes), parse_byte_size(t.disk.bytes)};
  o.prefetch_distance = t.prefetch_distance;
  // A part's blocks step in parallel on the CPU, one per thread; on the GPU one after another.
  o.min_blocks_per_part = cfg.runtime.backend == BackendKind::Cuda ? 1 : std::max(1, omp_get_max_threads());
  return o;
}

std::string disk_tier_file(const Config& cfg, const std::string& name) {
  const std::filesystem::path dir =
      cfg.runtime.tiers.disk.path.empty() ? std::filesystem::path(cfg.run.dir) / "tiers"
                                          : std::filesystem::path(cfg.runtime.tiers.disk.path);
  return (dir / ("state-" + std::to_string(::getpid()) + (name.empty() ? "" : "." + name) + ".bin")).string();
}

std::vector<bool> params_on_disk(const Config& cfg) {
  const int layers = cfg.model.n_layers + 2;
  std::vector<bool> on_disk(static_cast<size_t>(layers), false);
  if (cfg.runtime.tiers.params.home == ParamsHome::Disk)
    for (int l = 1; l <= cfg.model.n_layers; ++l) on_disk[static_cast<size_t>(l)] = true;
  return on_disk;
}

int params_buffers(const Config& cfg) {
  return ParamOffloadPlanOps::buffers(cfg.runtime.tiers.params.prefetch_distance, cfg.model.n_layers);
}

ParamOffloadBytes params_bytes(const Config& cfg) {
  std::vector<size_t> floats;
  for (const ParamTable& t : model_param_tables(cfg.model)) floats.push_back(t.numel);
  return param_offload_bytes(floats, params_on_disk(cfg), params_buffers(cfg));
}

void check_params_home(const Config& cfg, int world) {
  if (cfg.runtime.tiers.params.home != ParamsHome::Disk) return;
  if (cfg.runtime.backend == BackendKind::Cuda)
    fail(cfg.source, ": runtime.tiers.params.home disk runs on the CPU backend only (runtime.backend cpu): on CUDA the "
         "parameters live in device memory");
  if (world > 1)
    fail(cfg.source, ": runtime.tiers.params.home disk runs in one process only, not ", world,
         " ranks: a sharded rank (distributed.fsdp full or hybrid) keeps only its shards of the parameters already; "
         "shard the run instead, or use runtime.tiers.params.home memory");
}

TierLayout configured_tier_layout(const Config& cfg, TierCheck check) {
  return configured_tier_layout(cfg, model_param_tables(cfg.model), check);
}

TierLayout configured_tier_layout(const Config& cfg, const std::vector<ParamTable>& tables, TierCheck check) {
  try {
    const auto specs = optimizer_state_specs(cfg.optim, tables);
    const TierOptions options = tier_options(cfg);
    if (check == TierCheck::Planned) return place_and_plan_states(specs, options);
    // The planned layout may keep any of the device budget beyond its homes for the cache
    // (fragmentation): counted as kept, so that the quick figure is never below the planned one.
    TierLayout layout = place_states(specs, options);
    if (layout.moves() && options.budget[0] != kUnbounded)
      layout.device_cache_bytes = std::max<size_t>(layout.device_cache_bytes, options.budget[0] - layout.device_home_bytes);
    return layout;
  } catch (const Error& e) {
    fail(cfg.source, ": runtime.tiers: ", e.what());
  }
}

}  // namespace asteria
