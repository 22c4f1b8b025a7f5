#pragma once
// Settings of a run resolved from its config and the machine, shared by the trainer and its
// planning tools (--print-plan) so the two always agree.
#include <string>

#include "config/config.hpp"
#include "data/token_file.hpp"
#include "runtime/shadow_delay.hpp"

namespace asteria {

// data.dtype, with auto resolved from the vocabulary size.
TokenDtype data_dtype(const Config& cfg);

// The shadow pipeline's delay: runtime.shadow.delay, published at once up to sync_steps (-1:
// train.warmup_steps).
ShadowDelay shadow_delay(const Config& cfg);

// The compute lane's threads: runtime.threads, 0 = the process's default (OMP_NUM_THREADS or the
// cores, taken when the program loaded: not what an earlier run in the same process set, which
// would change reduction orders).
int compute_threads(const Config& cfg);

// Sets the compute lane's OpenMP and BLAS threads (runtime.threads; 0 = the defaults above).
void set_compute_threads(int threads);

// runtime.shadow.lane, with auto resolved: the host workers only when they have cores of their
// own, i.e. the compute lane's threads and the workers together fit the machine's cores; else
// the root jobs run in parts on the compute lane (on a CPU-only box whose cores the compute lane
// already uses, workers only take cycles from its OpenMP team, which then waits at its barriers).
ShadowLane shadow_lane(const Config& cfg);

}  // namespace asteria
