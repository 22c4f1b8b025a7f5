#include <mutex>

#include "core/step_metrics.hpp"
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
  buffers_.record_metrics(m);
}

void JobBuffers::record_metrics(StepMetrics& m) {
  // runtime.shadow.resident_jobs: the job store's traffic this step and the buffers in memory.
  std::lock_guard<std::mutex> lock(mu_);
  if (!store_) return;
  m.local("shadow_jobs_in_memory", buffer_sets_);
  m.local("shadow_parked_bytes", static_cast<double>(store_->bytes_parked()));
  m.local("shadow_park_write_bytes", static_cast<double>(store_->bytes_written() - reported_written_));
  m.local("shadow_park_read_bytes", static_cast<double>(store_->bytes_read() - reported_read_));
  m.local("shadow_park_s", park_s_);
  m.local("shadow_jobs_over_budget", static_cast<double>(over_budget_));
  reported_written_ = store_->bytes_written();
  reported_read_ = store_->bytes_read();
  park_s_ = 0;
}

}  // namespace asteria
