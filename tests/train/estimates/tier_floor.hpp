#pragma once
// The least memory the tiers alone can bring a config to: nothing prefetched, the device tier
// just the unit in flight, the layers in their smallest parts (raised an eighth at a time
// while the cache's fragmentation needs more), nothing on the host. Placement tests set limits between it and the all-in-memory
// need.
#include "config/config.hpp"
#include "core/error.hpp"
#include "model/model.hpp"
#include "optim/optimizer_factory.hpp"
#include "train/estimates/memory_estimate.hpp"
#include "train/estimates/placement.hpp"
#include "train/tier_config.hpp"

namespace asteria::testing {

// A placement of one process against `limit` (the estimate of the config as it goes, no disk bound).
inline PlacementInputs one_process_inputs(uint64_t limit) {
  PlacementInputs in;
  in.limit = limit;
  in.limit_source = "test limit";
  in.estimate = [](const Config& c, TierCheck check) { return process_memory(c, check); };
  return in;
}

// `distance`: the prefetch distance it is reached at (placement goes down to 0).
inline double least_with_tiers(const Config& c, int distance = 0) {
  Config x = c;
  x.runtime.tiers.prefetch_distance = distance;
  x.runtime.tiers.host.bytes = "0";
  const int least_part = tier_options(x).min_blocks_per_part;
  for (size_t device = tier_cache_need(optimizer_state_specs(x.optim, model_param_tables(x.model)), distance, least_part);;
       device += device / 8) {
    x.runtime.tiers.device.bytes = std::to_string(device);
    try {
      return process_memory(x).total();
    } catch (const Error&) {   // the cache's fragmentation needs more
    }
  }
}

}  // namespace asteria::testing
