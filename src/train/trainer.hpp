#pragma once
// The training loop of one process. Construction validates everything that can be wrong
// (supported features, data files, sequence length vs data, the checkpoint to resume from and
// its config) before anything is written to run.dir; run() then trains to train.steps, each step
// executed as a plan (step_plan.hpp), and writes run.dir/config.yaml (the resolved config),
// run.dir/metrics.jsonl, run.dir/run_info.json and checkpoints (run.dir/checkpoints, every
// checkpoint.every steps and at the end; checkpointer.hpp).
//
// Stopping early: train.stop_after, or SIGTERM / SIGINT / SIGUSR1 while run() runs (Slurm
// preemption): the current step finishes, a checkpoint is written, and run() returns with
// `signal` set (the program then exits with kExitCheckpointedOnSignal). A second SIGINT ends the
// process at once (exit 130).
#include <memory>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "train/placement_watch.hpp"

namespace asteria {

struct TrainResult {
  double final_loss = 0;       // training loss of the last step
  double final_eval_loss = -1; // -1 when there is no eval data
  double tokens_per_s = 0;     // mean over the steps after the first
  int64_t last_step = 0;       // the last step trained (train.steps unless stopped early)
  int signal = 0;              // the signal that stopped the run (a checkpoint was written), or 0
  std::string checkpoint;      // the last checkpoint written, or ""
};

// asteria-train's exit code after a stop by signal with its checkpoint written (a requeue
// script tests it): 75, EX_TEMPFAIL ("try again").
constexpr int kExitCheckpointedOnSignal = 75;
// A rank, its host or its link was lost (a collective's timeout, a failed transport: CommError):
// the run can go on from its newest checkpoint once the ranks are back (train.sbatch requeues).
constexpr int kExitCommLost = 76;

// Several ranks (a `world` communicator of more than one rank): with distributed.fsdp none every
// rank holds the whole model and optimizer state (replicated, DDP-like); full and hybrid shard
// them (fsdp/sharding.hpp). Rank r trains on instances r, r + W, ... of each global micro-batch,
// gradients are summed over the ranks and divided by W, so every rank takes the same step and
// the replicas stay bit-identical (checked at the end). Rank 0 writes run.dir (config, metrics,
// progress); a stop signal on any rank stops every rank after the same step. On
// runtime.backend cuda each rank computes on its own GPU (train/rank_device.hpp) and the
// gradients' all-reduce runs over NCCL in device memory; there only fsdp none is built (full and
// hybrid are refused).
class Communicator;

class Trainer {
 public:
  // memory: the memory limit as runtime.placement auto reads it at startup and at every step
  // boundary (with runtime.memory_limit auto; train/placement_watch.hpp); empty: the machine's.
  // Tests inject one that changes during the run.
  explicit Trainer(const Config& cfg, Communicator* world = nullptr, MemoryWatch memory = {});
  ~Trainer();
  TrainResult run();

  // Parameters of layer l after run(), the whole layer on every rank (tests compare runs bit for
  // bit). A copy, made when asked (gathered at the end of run() when sharded).
  std::vector<float> final_params(int layer) const;
  int num_layers() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};


}  // namespace asteria
