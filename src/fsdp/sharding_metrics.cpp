#include "fsdp/sharding.hpp"

namespace asteria {

void Sharding::record_metrics(StepMetrics& m, const Executor& executor) {
  const CommBytes bytes = take_bytes();
  if (!reduces()) return;
  // The compute lane's wait for collectives: a forward, recompute or backward for its gather, a
  // grad_norm for its reduction (the comm not hidden behind compute).
  const double wait = executor.wait_seconds(OpKind::Forward) + executor.wait_seconds(OpKind::Backward) +
                      executor.wait_seconds(OpKind::Recompute) + executor.wait_seconds(OpKind::GradNorm);
  const double comm = executor.seconds(OpKind::Gather) + executor.seconds(OpKind::ReduceScatter) +
                      executor.seconds(OpKind::AllReduce);
  // Rank 0's figures, and every rank's in the _by_rank lists (bytes: exact below 2^53).
  m.local("comm_s", comm);
  m.per_rank("comm_s_by_rank", comm);
  m.local("comm_wait_s", wait);
  m.per_rank("comm_wait_s_by_rank", wait);
  m.local("comm_bytes", {{"shard_group", bytes.group}, {"replicas", bytes.replicas}});
  m.per_rank("comm_bytes_by_rank/shard_group", static_cast<double>(bytes.group));
  m.per_rank("comm_bytes_by_rank/replicas", static_cast<double>(bytes.replicas));
}

}  // namespace asteria
