#include "train/tier_config.hpp"

#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include "core/error.hpp"
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
