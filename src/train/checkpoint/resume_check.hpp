#pragma once
// Which config keys may differ between a checkpoint and the run that resumes from it: each key's
// OnResume, declared beside it in the schema (config/config_schema.hpp; docs/configuration.md's
// "on resume" column).
//
//   free       changes no bit (how and where the run computes and keeps its state, logging,
//              limits, paths, every distributed.* key: the state is stored in global form):
//              accepted.
//   placement  changes the arithmetic but not the run (what runtime.placement chooses for the
//              machine it lands on: the micro-batch split, the LM head's chunks): accepted and
//              returned, to be said at startup. The micro-batch and grad_accum may change only
//              together with the launch's ranks so that the global batch (instances per step) is
//              the checkpoint's; the checkpoint's is its tokens / (step x seq_len).
//   fixed      the run's meaning (the model, the optimizer, the schedule, the seed): refused
//              unless listed in checkpoint.allow_changes (a dotted key, or a section: "optim"
//              accepts every optim key). A fixed key the config does not give took the
//              checkpoint's value before (config/config.hpp adopt_checkpoint_config).
// The train token file must have the fingerprint the checkpoint recorded, whatever its path
// (unless data.train is in checkpoint.allow_changes).
#include <string>
#include <vector>

#include "train/checkpoint/checkpoint_manifest.hpp"
#include "config/config.hpp"

namespace asteria {

// An Error listing every fixed key that differs (each with both values), a global batch that
// would change, or the data file whose fingerprint differs. `checkpoint_dir` names the checkpoint in
// the message; `ranks` is the resuming launch's. Returns the placement keys that differ ("key: the
// checkpoint's -> now"), to be said.
std::vector<std::string> check_resume_compatible(const Config& saved, const Config& now, const Manifest& manifest,
                                                 const std::string& checkpoint_dir, int ranks);

}  // namespace asteria
