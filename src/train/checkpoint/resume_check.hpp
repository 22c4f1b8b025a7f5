#pragma once
// Which config keys may differ between a checkpoint and the run that resumes from it.
//
// May change: train.steps, train.stop_after, train.eval_every, data.eval, data.eval_batches,
// checkpoint.*, run.*, runtime.threads, runtime.shadow.threads / lane / worker_delay_ms and
// runtime.tiers.* (how and where the run computes and keeps its state, not what it computes),
// every distributed.* key (the state is stored in global form: how ranks share it, and
// distributed.world_size, may change with the launch), and data.train's path when the file's
// fingerprint is the same.
// Every other key (the model, the optimizer and its block structure and hyperparameters, the
// seed, micro-batch and grad accumulation, the LR schedule's shape, runtime.mode / delay /
// stagger) must be equal, unless it is listed in checkpoint.allow_changes, which accepts it on
// purpose (a dotted key, or a section: "optim" accepts every optim key). The train token file
// must have the fingerprint the checkpoint recorded, whatever its path (unless data.train is in
// checkpoint.allow_changes).
#include <string>
#include <vector>

#include "train/checkpoint/checkpoint_manifest.hpp"
#include "config/config.hpp"

namespace asteria {

// An Error listing every key that differs and may not (each with both values), or the data
// file whose fingerprint differs. `checkpoint_dir` names the checkpoint in the message.
void check_resume_compatible(const Config& saved, const Config& now, const Manifest& manifest,
                             const std::string& checkpoint_dir);

}  // namespace asteria
