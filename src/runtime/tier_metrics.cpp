#include "runtime/tier_manager.hpp"

namespace asteria {

void TierManager::record_metrics(StepMetrics& m, const Executor& executor) {
  const TierStats ts = take_stats();
  m.local("tier_bytes", {{"device", ts.resident[0]}, {"host", ts.resident[1]}, {"disk", ts.resident[2]}});
  m.local("tier_device_peak_bytes", ts.device_peak);
  m.local("tier_moved_bytes", {{"host_to_device", ts.host_to_device},
                               {"device_to_host", ts.device_to_host},
                               {"disk_to_device", ts.disk_to_device},
                               {"device_to_disk", ts.device_to_disk}});
  m.local("tier_stall_s", executor.wait_seconds(OpKind::TierWait));
  m.local("tier_staging_s", executor.seconds(OpKind::TierEvict) + executor.seconds(OpKind::TierPrefetch));
}

}  // namespace asteria
