#include "runtime/shadow.hpp"

namespace asteria {

void ShadowPipeline::record_metrics(StepMetrics& m, const Executor& executor) {
  m.per_rank("shadow_computed_by_rank", static_cast<double>(computed()));   // refreshes each rank computed so far
  m.local("shadow_stall_s", take_stall_seconds());
  m.local("shadow_in_flight", in_flight());
  m.local("shadow_published", published());
  m.local("staging_s", executor.seconds(OpKind::Snapshot));
  // runtime.shadow.lane compute: the step's root jobs on the compute lane.
  if (!pool_) m.local("root_jobs_s", executor.seconds(OpKind::RootJobBatch));
}

}  // namespace asteria
