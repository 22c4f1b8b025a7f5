#include "runtime/coherence.hpp"

namespace asteria {

void Coherence::record_metrics(StepMetrics& m, const Executor& executor, int64_t step) {
  const CoherenceTraffic traffic = take_traffic();
  m.sum("coherence_bytes_intra", static_cast<double>(traffic.bytes_intra));
  m.sum("coherence_bytes_inter", static_cast<double>(traffic.bytes_inter));
  // Every replica of a group counts the same versions: one of them reports its group's.
  const int64_t shipped = registry_.take_shipped(), skipped = registry_.take_skipped();
  const bool reports = replica_rank() == 0;
  m.sum("coherence_shipped_blocks", reports ? static_cast<double>(shipped) : 0.0);
  m.sum("coherence_skipped_versions", reports ? static_cast<double>(skipped) : 0.0);
  m.local("coherence_s", executor.seconds(OpKind::CoherenceSync));   // rank 0's comm lane in the syncs
  const Staleness st = registry_.staleness(step);                   // rank 0's replica group's blocks
  m.local("staleness_max", {{"versions", st.max_versions}, {"steps", st.max_steps}});
  m.local("staleness_mean", {{"versions", st.mean_versions}, {"steps", st.mean_steps}});
  // How far rank 0's group's new versions moved from the adopted ones (for choosing a tolerance).
  const VersionChanges ch = take_changes();
  if (ch.versions > 0) m.local("coherence_change", {{"mean", ch.sum / static_cast<double>(ch.versions)}, {"max", ch.max}});
}

}  // namespace asteria
