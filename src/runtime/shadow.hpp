#pragma once
// The shadow pipeline (docs/DESIGN.md "Runtime subsystems"): second-order refreshes off the critical
// path, with deterministic bounded staleness.
//
// At a block's refresh point of optimizer step t, when its refresh is due, a job slot is opened
// that publishes at step t + D (D = runtime.shadow.delay):
//   snapshot(layer)      staging lane, after the layer's optim_step (of each part, when the
//                        tiers step it in parts: the part's blocks): copies the factors (and
//                        bases) of the refreshing blocks into their job slots (back buffers;
//                        the optimizer keeps reading its installed roots, the front);
//   root_job(layer, b)   host lane: the pure refresh computation on a worker thread;
//   publish_wait(layer)  compute lane, before the layer's optim_step of step t + D: waits for
//                        the jobs due then (the bounded barrier; the wait is shadow stall);
//   the install itself happens at the block's refresh point of step t + D.
// Since a job's result depends only on its snapshot and is installed at a fixed step, the
// parameters are bit-identical whatever the number and speed of the workers. With D = 0 the job
// runs on a worker while the step waits, which is the native schedule (bit-identical to native).
// The refresh schedule is a pure function of the step (optim/refresh_schedule.hpp), so the ops
// of any step are known when its plan is built (ShadowPlanOps, shadow_plan_ops.hpp, also used by
// --print-plan). The jobs' fp64 buffers are lent to whichever refresh needs them, at most
// runtime.shadow.resident_jobs sets in memory (JobBuffers, shadow_job_buffers.hpp).
//
// Replicated state (coherence.hpp): only a block's owner snapshots and computes its refreshes.
// At the publish step a coherence_sync(layer) op on the comm lane (after the step's last
// gradient reduction, before the layer's publish_wait) ships the owners' versions of the blocks
// publishing then, overlapping the end of the backward and clip_grads; every replica
// installs a shipped version at the block's refresh point of that step (dropped versions are
// computed and never installed). A warm-up refresh (published at once) syncs at its refresh point.
// The owner keeps the newest version it dropped and starts the block's next refresh from it
// (BlockPreconditioner::keep_dropped), so that a refresh never repeats one that came to nothing;
// that needs each decision before the block's next snapshot, runtime.shadow.delay <=
// optim.precondition_frequency (checked when the config loads).
//
// Warm-up: refreshes opened at steps t <= runtime.shadow.sync_steps publish at once (D = 0 for
// them; shadow_delay.hpp). Without host workers (runtime.shadow.lane compute, or auto on a
// machine whose cores the compute lane uses) the refreshes run in parts on the compute lane's
// threads instead (root_job_placement.hpp), with the same results: the parts of refreshes opened
// at earlier steps right after the last backward, while the last gradient reductions are in
// flight (a multi-rank step would otherwise wait for them idle), and those opened at this step at
// its end, after their snapshots.
#include <atomic>
#include <condition_variable>
#include <deque>
#include <string>
#include <utility>
#include <memory>
#include <mutex>
#include <vector>

#include "optim/refresh_policy.hpp"
#include "optim/second_order.hpp"
#include "runtime/coherence.hpp"
#include "runtime/executor.hpp"
#include "runtime/plan_builder.hpp"
#include "runtime/root_job_placement.hpp"
#include "runtime/shadow_delay.hpp"
#include "runtime/shadow_job_buffers.hpp"
#include "runtime/shadow_plan_ops.hpp"
#include "runtime/worker_pool.hpp"

namespace asteria {

// A refresh opened and not yet published, computed to the end: what a checkpoint keeps of the
// shadow pipeline (install() reads only the job's results).
struct OpenRefresh {
  int layer = 0, block = 0;
  int64_t publish_step = 0;
  RefreshJob job;
};

// Coherence: the newest dropped version of a block its next refresh continues from (on the
// owner; keep_dropped's fields only), which a checkpoint keeps too.
struct KeptVersion {
  int layer = 0, block = 0;
  RefreshJob version;
};

// How a ShadowPipeline runs (TrainingRun::build_runtime, train/training_run.cpp, fills it from the
// config).
struct ShadowOptions {
  // The host workers, or null to run the root jobs on the compute lane (with as many threads as
  // OpenMP has now).
  WorkerPool* pool = nullptr;
  // D, and the synchronous warm-up (runtime.shadow.delay, sync_steps; shadow_delay.hpp).
  ShadowDelay delay;
  // Each root job first sleeps this long (tests: slow workers).
  double worker_delay_s = 0;
  // The replicas' protocol, or null (no replicas of this rank's blocks).
  Coherence* coherence = nullptr;
  // The workers compute each job by the block backend's own solvers
  // (BlockPreconditioner::compute_refresh_in_place: cuSOLVER on the device, on a low-priority
  // stream of each worker's; runtime.shadow.lane device) instead of the host's matrix functions.
  // Either way a job's result depends only on its snapshot. Needs a pool.
  bool in_place = false;
  // The step has gradient collectives (several ranks), which the compute lane's root jobs of
  // earlier refreshes overlap (RootJobPlacement's two batches).
  bool gradient_reductions = false;
  // runtime.shadow.resident_jobs: at most this many refresh jobs' buffers in memory (0: as many as
  // are in flight), the waiting jobs beyond it parked in jobs_file (JobBuffers::set_resident_jobs).
  int resident_jobs = 0;
  // Where jobs are parked (the disk tier's directory; created when the first is parked). Read
  // only with resident_jobs > 0.
  std::string jobs_file;
};

// Stateful ("shadow"): the open refreshes, computed to the end, and with coherence the kept
// versions (fields in shadow_state.cpp). Saving computes every open refresh to the end (with
// coherence, after prepare_checkpoint). Loading keeps this rank's blocks (a sharded run) and
// puts their refreshes back, to install at their publish steps.
class ShadowPipeline final : public RefreshPolicy, public Stateful {
 public:
  // Registers itself as opt's refresh policy (until destroyed); options: ShadowOptions above.
  ShadowPipeline(SecondOrderOptimizer& opt, const ShadowOptions& options);
  ~ShadowPipeline() override;

  void bind(Executor& ex);
  PlanContributor& plan_ops() { return *plan_ops_; }

  // runtime.shadow.resident_jobs placed again (ShadowOptions::resident_jobs at construction):
  // at most `jobs` refresh jobs' buffers in memory (0: as many as are in flight); a job that
  // waits while another needs buffers is parked in `file` and read back when it is needed: the
  // one furthest from its publish step first (JobBuffers, shadow_job_buffers.hpp). The results
  // are the same bits. Between steps only (a run's re-placement may lower it: jobs beyond it are
  // parked and their buffers freed now).
  void set_resident_jobs(int jobs, const std::string& file) { buffers_.set_resident_jobs(jobs, file); }
  int resident_jobs() const { return buffers_.resident_jobs(); }

  // RefreshPolicy.
  void at_refresh_point(int layer, int block, BlockPreconditioner& pc, int64_t step, bool due,
                        RefreshJob& job, matfn::Workspace& ws) override;
  bool refreshes_inline() const override { return false; }
  // Replicated blocks: a warm-up refresh due now, or a version publishing now that no
  // coherence_sync op carried, is exchanged at the refresh point.
  bool exchanges_at(int layer, int block, int64_t step, bool due) const override;

  // Seconds the compute lane waited for root jobs since the last call.
  double take_stall_seconds();
  // Jobs opened and not yet published.
  int in_flight() const;
  int64_t published() const { return published_; }
  Coherence* coherence() const { return coherence_; }
  // Refreshes this rank computed (with coherence: those of the blocks it owns).
  int64_t computed() const { return computed_; }
  // The step's pipeline figures (shadow_metrics.cpp): stalls, refreshes in flight and published,
  // the staging lane's snapshot time, the compute lane's root jobs (no workers), and every rank's
  // count of refreshes computed so far.
  void record_metrics(StepMetrics& metrics, const Executor& executor);

  // Checkpoints, between steps. finish_open_refreshes computes every open refresh to the end
  // (waits for the workers; on the compute lane runs the parts not run yet, on this thread:
  // parts are pure, so the bits are those the placed parts would give, and the placed tasks of
  // a finished refresh do nothing) and returns them in publish order per block.
  // restore_open_refreshes puts them back (into a pipeline with none open), to install at their
  // publish steps.
  // With coherence every replica calls prepare_checkpoint() first (collective over the replica
  // group): the owners compute their open refreshes to the end and send them to the replica
  // that writes the checkpoint (replica rank 0).
  void prepare_checkpoint();
  std::vector<OpenRefresh> finish_open_refreshes();
  void restore_open_refreshes(const std::vector<OpenRefresh>& open);
  // The kept versions (coherence; after prepare_checkpoint, on replica rank 0 those of every
  // block) and their restore (before the first step; blocks without one start from the installed
  // state).
  std::vector<KeptVersion> kept_versions() const;
  void restore_kept_versions(const std::vector<KeptVersion>& kept);

  std::string state_name() const override { return "shadow"; }
  void save_state(StateWriter& out) override;
  void load_state(const StateReader& in) override;

 private:
  // The coherence registry's blocks by layer and whole-layer block in checkpoints.
  void name_registry_blocks();
  // Remote: another replica owns the block; its version arrives at the publish step.
  enum class SlotState { AwaitingSnapshot, Snapshotted, Computing, Ready, Remote };
  // A refresh job and its place in the pipeline; layer, block, publish_step and the job itself
  // are JobLoan's (its buffers are lent by buffers_).
  struct Slot : JobLoan {
    int64_t opened = 0;          // the step whose factors it is computed from
    uint64_t queued = 0;         // its place in queues_ (push order, from 1); 0 while in none
    bool synced = false;         // coherence: its coherence_sync ran (ship: the decision)
    bool ship = false;
    SlotState state = SlotState::AwaitingSnapshot;
    int parts_done = 0;   // Snapshotted with parts_done > 0: computed in part (compute lane)
  };
  using SlotPtr = std::shared_ptr<Slot>;
  struct BlockQueue {
    std::deque<SlotPtr> slots;       // ordered by publish step
  };

  // A free slot (mu_ held), without buffers (its job's buffers are lent by buffers_.hold:
  // recycled from any block, the pipeline holds as many as are in flight at once, or
  // resident_jobs, not one per block, which for OLMo-1B SOAP would be 36 GiB of fp64 buffers).
  SlotPtr acquire();
  // mu_ held: the slot joins the back of its block's queue (its queued place taken).
  void enqueue(const SlotPtr& slot);
  // A slot done with: its buffers back to buffers_, its image (if parked) dropped, the slot free.
  void release(const SlotPtr& slot);
  // buffers_' WaitingTest (its lock held; takes mu_): a job may be parked while it is in a queue
  // and waits: snapshotted (for its next part), computed, or a replica's version; its order is
  // its queued place.
  void classify_waiting(std::vector<JobBuffers::Candidate>& candidates) const;
  void submit(int layer, int block, const SlotPtr& slot);
  // Parts [begin, end) of the slot's refresh (end -1: all); Ready after the last.
  void compute(int layer, int block, const SlotPtr& slot, int worker, int begin = 0, int end = -1);
  void wait_ready(const SlotPtr& slot);
  SlotPtr find_slot(int layer, int block, int64_t publish_step);
  // Compute lane: the tasks placed at `step` of kind `which` (ShadowPlanOps::kEarlierRefreshes,
  // ...), one per thread at a time.
  void run_batch(int64_t step, int which);

  // Installs (or, with coherence, syncs and maybe installs) a slot's version at its publish step.
  void publish_slot(int layer, int block, BlockPreconditioner& pc, const SlotPtr& slot);
  // The job's inputs from the block, continued from its kept version if there is one.
  void take_snapshot(int layer, int block, const BlockPreconditioner& pc, Slot& slot);
  // Coherence: the slot's version synced; on the owner a dropped one becomes the kept version.
  void sync_slot(int layer, int block, Slot& slot);
  // Computes every open refresh this rank has to the end (waits for the workers).
  void complete_open_refreshes();

  SecondOrderOptimizer& opt_;
  WorkerPool* pool_;
  Coherence* coherence_;
  bool track_change_;   // coherence: the owner computes each job's change (the tolerance, metrics)
  ShadowDelay delay_;
  std::unique_ptr<RootJobPlacement> placement_;   // compute lane only
  std::vector<PlacedTask> batch_;
  std::vector<std::pair<PlacedTask, SlotPtr>> batch_slots_;
  double worker_delay_s_;
  bool in_place_;
  std::vector<std::vector<BlockQueue>> queues_;     // [layer][block]
  std::vector<SlotPtr> free_;                       // recycled slots, shared by all blocks
  std::vector<std::vector<RefreshJob>> kept_;       // [layer][block]; rows 0: none kept
  std::vector<std::unique_ptr<matfn::Workspace>> worker_ws_;   // per worker / compute thread
  mutable std::mutex mu_;
  std::condition_variable ready_cv_;
  double stall_s_ = 0;
  std::atomic<int64_t> published_{0};
  std::atomic<int64_t> computed_{0};
  uint64_t queue_pushes_ = 0;   // mu_: the slots ever queued (Slot::queued)
  std::unique_ptr<ShadowPlanOps> plan_ops_;
  // The slots' job buffers: lock order buffers_' lock, then mu_ (classify_waiting); never the
  // other way: nothing calls buffers_ with mu_ held.
  JobBuffers buffers_;
};

// The shadow pipeline's place in checkpoints where a run has none (runtime.mode native): it
// saves nothing and refuses a checkpoint holding refreshes in flight (they would be lost).
class NoShadowPipeline final : public Stateful {
 public:
  std::string state_name() const override { return "shadow"; }
  void save_state(StateWriter&) override {}
  void load_state(const StateReader& in) override;
};

// What of the runtime a checkpoint keeps: the shadow pipeline (or NoShadowPipeline when null)
// and, with replicas, its coherence registry.
std::vector<Stateful*> shadow_state_parts(ShadowPipeline* shadow);

}  // namespace asteria
