#include "train/checkpoint/checkpointer.hpp"

namespace asteria {

void Checkpointer::record_metrics(StepMetrics& m, const Executor& executor) {
  // The times of the last save go on the line of the step after it (the hold between them):
  // the save's own hold plus this step's wait for the async copy, which ran beside its forward.
  const CheckpointTimes ct = take_times();
  const double held = ct.hold_s + executor.wait_seconds(OpKind::CheckpointWait);
  if (held > 0) m.local("checkpoint_s", held);
  if (executor.seconds(OpKind::CheckpointCopy) > 0) m.local("checkpoint_copy_s", executor.seconds(OpKind::CheckpointCopy));
  if (ct.bytes > 0) {
    m.local("checkpoint_bytes", ct.bytes);
    m.local("checkpoint_write_s", ct.write_s);
  }
}

}  // namespace asteria
