#include "train/tier_config.hpp"

#include <unistd.h>

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
  return o;
}

std::string disk_tier_file(const Config& cfg) {
  const std::filesystem::path dir =
      cfg.runtime.tiers.disk.path.empty() ? std::filesystem::path(cfg.run.dir) / "tiers"
                                          : std::filesystem::path(cfg.runtime.tiers.disk.path);
  return (dir / ("state-" + std::to_string(::getpid()) + ".bin")).string();
}

TierLayout configured_tier_layout(const Config& cfg) { return configured_tier_layout(cfg, model_param_tables(cfg.model)); }

TierLayout configured_tier_layout(const Config& cfg, const std::vector<ParamTable>& tables) {
  try {
    return place_and_plan_states(optimizer_state_specs(cfg.optim, tables), tier_options(cfg));
  } catch (const Error& e) {
    fail(cfg.source, ": runtime.tiers: ", e.what());
  }
}

}  // namespace asteria
