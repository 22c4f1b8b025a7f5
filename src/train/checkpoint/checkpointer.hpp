#pragma once
// Saving and restoring the complete state of a training run (docs/DESIGN.md "Checkpoints"): the
// parameters and every optimizer state tensor wherever its tier keeps it (streamed as the
// optimizer's StatePieces), the step, tokens and elapsed time ("train.*"), and the named fields
// of the run's Stateful components (core/stateful.hpp; RunParts::state: the loader's position,
// the optimizer's counters, the shadow pipeline's open refreshes, the coherence registry, ...),
// stored under /values without the checkpointer knowing what they mean: a new component joins
// the list where the run is put together, not here. The LR is a function of the step; nothing
// else in a run draws random numbers (init uses the seed once).
//
// save(step) runs at a step boundary (every lane idle). With checkpoint.async the state is
// copied into the image (allocated at the first save and reused) by the checkpoint_copy op,
// first on the staging lane of the next step's plan: the forward pass changes no parameter or
// optimizer state, so the copy runs beside it, and the checkpoint_wait op before the first
// optimizer op holds the step only while the copy is unfinished. The files are then written
// and committed on the checkpoint thread while training goes on (checkpoint_write_s); the next
// save first waits for the previous write. When no step follows (the last one, a signal), the
// save copies at once. The copy needs memory for the whole state: when it would take more than
// half the memory available at the first save, or without async, the files are written in the
// step straight from where the state lives (parameters, device and host tiers in place;
// disk-tier state, parameters on the disk tier included, through one buffer of its largest
// tensor), so a checkpoint never needs a second copy of the state. Retention (checkpoint.keep / keep_every) runs after each commit. A
// failed write is reported at the next save or at finish().
//
// Sharded, every rank of the shard group writes its own file (rank<g>.h5, its shard) into one
// temporary directory that the group's first rank makes, and that rank publishes it once all
// files are written (collective over the group). With checkpoint.async the files are written
// on the checkpoint threads as above; publishing needs every rank, so it happens at a step
// boundary they agree on: each step the trainer sums shard_write_state() over the ranks with
// the step's loss, and when every writing rank has written, all of them call finish(). The
// next save and the end of the run finish (and publish) a write still in flight.
//
// restore(dir) checks the checkpoint (manifest, file sizes and checksums, every tensor with its
// shape) before it changes anything; then each component loads its fields (checking them first,
// an Error naming the field and the file), and the tensors are read one by one into the run.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/stateful.hpp"
#include "core/step_metrics.hpp"
#include "fsdp/param_offload.hpp"
#include "fsdp/sharding.hpp"
#include "model/model.hpp"
#include "optim/optimizer.hpp"
#include "runtime/executor.hpp"
#include "runtime/plan_builder.hpp"
#include "runtime/tier_manager.hpp"
#include "train/checkpoint/checkpoint_image.hpp"
#include "train/checkpoint/checkpoint_manifest.hpp"
#include "config/config.hpp"

namespace asteria {

// What a run is made of, as far as its state goes: the tensors (the parameters, and the
// optimizer's state tensors wherever its tiers keep them), and the components that save named
// fields (core/stateful.hpp: the loader, the optimizer's counters, the shadow pipeline, ...),
// which the checkpointer stores under /values without knowing them.
struct RunParts {
  Model<float>& model;
  Optimizer& optimizer;           // its state_pieces: how its state tensors are named in files
  TierManager& tiers;
  std::vector<Stateful*> state;   // saved in this order, loaded in this order
  Sharding* sharding = nullptr;   // sharded: each rank of the shard group writes its own file
  // Parameters on the disk tier (null: the model holds them): saved from and restored into it.
  OffloadedParams* offloaded = nullptr;
};

// Where a restored run continues.
struct ResumePoint {
  int64_t step = 0;         // the last step the checkpoint holds
  double elapsed_s = 0;
  std::string dir;
};

struct CheckpointTimes {
  double hold_s = 0;        // save() held the step (the whole write when synchronous; the copy's
                            // wait in the next step is the executor's checkpoint_wait stall)
  double write_s = 0;       // the last finished write (files, fsync, commit)
  size_t bytes = 0;         // the last finished checkpoint's files
};

class Checkpointer {
 public:
  // data: the fingerprints of the run's token files (manifest "data").
  Checkpointer(const Config& cfg, RunParts parts, std::vector<DataFingerprint> data);
  ~Checkpointer();   // waits for a write in flight

  // more_steps: another step of this process follows, so an async copy can run in its plan.
  void save(int64_t step, int64_t tokens, double elapsed_s, bool more_steps);
  // Waits for the write in flight (doing a pending copy first); rethrows its error.
  void finish();
  // The checkpoint_copy / checkpoint_wait ops; register the contributor first, so the copy
  // precedes every tier move on the staging lane.
  PlanContributor& plan_ops() { return plan_ops_; }
  void bind(Executor& ex);
  // The times of the last save and the last finished write, reset by the call.
  CheckpointTimes take_times();
  // The last save's times (take_times) and this step's checkpoint ops, on the step's line
  // (checkpoint_metrics.cpp).
  void record_metrics(StepMetrics& metrics, const Executor& executor);
  // Sharded async: whether a checkpoint waits to be published, and whether this rank's file of
  // it is written (then finish() only publishes).
  bool shard_write_pending() const { return shard_write_.pending; }
  bool shard_written() const;

  ResumePoint restore(const std::string& dir);
  std::string root() const;   // run.dir/checkpoints

 private:
  struct Writer;
  struct PlanOps : PlanContributor {
    bool copy_pending = false;   // a save waits for its copy in the next step's plan
    int copy_op = -1;
    void micro_begin(PlanBuilder& b, int micro) override;
    void optimizer_begin(PlanBuilder& b) override;
  };
  void copy_and_start_writer();
  void lay_out();                  // the image's buffers and pieces (once; no data)
  void capture_values(int64_t step, int64_t tokens, double elapsed_s);
  void stage();                    // copies the tensors into the image (async)
  const float* live(size_t buffer);   // where buffer i is now (direct writes)
  void write_and_commit();
  // Sharded: the temporary directory (collective), then this rank's file at once or on the
  // checkpoint thread (async), then publish_sharded (collective) at once or at a later finish().
  void save_sharded(int64_t step, bool more_steps);
  void write_rank_file();
  void publish_sharded();
  bool sharded() const;
  // This rank's part of layer l's parameters (all of it unsharded) in memory; null for a layer
  // on the disk tier (then copy_params_out / copy_params_in).
  float* params(int layer);
  void copy_params_out(int layer, float* dst);
  void copy_params_in(int layer, const float* src);
  Manifest manifest_for(int64_t step, int64_t tokens, double elapsed_s) const;

  const Config& cfg_;
  RunParts parts_;
  std::vector<DataFingerprint> data_;
  CheckpointImage image_;
  Manifest pending_;               // of the image being written
  bool laid_out_ = false;
  bool async_;
  bool decided_ = false;           // async_ settled against the memory available
  std::vector<float> scratch_;     // direct writes: a disk-tier state on its way to the file
  std::vector<size_t> sizes_;      // floats of each image buffer
  CheckpointTimes times_;
  std::unique_ptr<Writer> writer_;
  PlanOps plan_ops_;
  struct ShardWrite {              // sharded: the checkpoint being written
    bool pending = false;          // written or being written, not yet published
    int64_t step = 0;
    std::string dir;               // the group's temporary directory
    std::string error;             // this rank's failure to write its file
    uint64_t hash = 0;             // of its file
    size_t bytes = 0;
    double write_s = 0;
  } shard_write_;
};

// Resolves checkpoint.resume / --resume: "latest" (the newest complete checkpoint under
// run.dir/checkpoints, or "" when there is none) or a path (an Error when it is not a
// checkpoint directory).
std::string resolve_resume(const Config& cfg);

}  // namespace asteria
