#pragma once
// run.dir made ready for a run's steps (rank 0): the directory, its resolved config.yaml and
// run_info.json, the figures the run's metrics are measured against (the peak rate of the mfu,
// the FLOPs per token and their formulas, the backend, precision, threads, BLAS kernels, tokens
// per step, ranks, the optimizer's GEMM FLOPs, the shadow lane and the placement).
#include <cstdint>

namespace asteria {

struct TrainingRun;

// The rates a run's metrics are measured against.
struct RunRates {
  double peak_flops = 0;          // the mfu's reference (0: unknown)
  double flops_per_token = 0;
  int64_t tokens_per_step = 0;    // the global batch
};

// The run's rates on every rank; on the writer rank also run.dir prepared (a resumed run's files
// cut back to its checkpoint; train/run_dir.hpp) with config.yaml and run_info.json written.
RunRates start_run_dir(const TrainingRun& run);

}  // namespace asteria
