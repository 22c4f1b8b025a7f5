#pragma once
// The run directory (run.dir) before a run writes into it: whether the run may start there (a
// fresh run, or a resume whose checkpoint and config are compatible), and the cleanup before
// its first step. Every rank checks; only the writing rank (rank 0) changes the directory.
#include <cstdint>
#include <filesystem>
#include <string>

#include "config/config.hpp"

namespace asteria {

// Resuming (checkpoint.resume names a checkpoint, or `latest` finds one): the fixed keys `cfg` does
// not give take the checkpoint's values (adopt_checkpoint_config), before runtime.placement places
// the run for this machine. Nothing for a fresh run. `writer`: this rank prints what was kept.
void adopt_resumed_config(Config& cfg, bool writer);

// The checkpoint to resume from ("" for a fresh run), after checking it and its config against
// `cfg` (resume_check.hpp; `ranks`: this launch's, for the global batch); refuses a fresh run in a
// run.dir that already holds one (unless run.overwrite). A refused resume changes nothing.
// `writer`: this rank prints the notes and the placement keys the resume changes.
std::string check_run_dir(const Config& cfg, bool writer, int ranks);

// Before the first step writes anything: stale checkpoint directories go, a resumed run's
// metrics are cut back to its checkpoint's step, and a fresh run with run.overwrite drops the
// old run's checkpoints (or `latest` would find them).
void prepare_run_dir(const std::filesystem::path& dir, const Config& cfg, const std::string& resume_dir,
                     int64_t resumed_step);

}  // namespace asteria
