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
// of any step are known when its plan is built (ShadowPlanOps, also used by --print-plan).
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
#include "runtime/shadow_job_store.hpp"
#include "runtime/worker_pool.hpp"

namespace asteria {

// The shadow pipeline's ops in a step's plan: publish_wait(l) before optim_step(l) for the
// blocks publishing now, snapshot(l) after it (after each of its parts) and one root_job per block refreshing now (host
// lane); or, with a placement (compute lane), root_jobs ops running the parts placed at this
// step: at its end, or, where the placement has two batches (gradient reductions to overlap),
// after the last backward (refreshes opened earlier) and at the end (opened now).
class ShadowPlanOps final : public PlanContributor {
 public:
  // blocks_per_layer[l]: number of preconditioned blocks of layer l; placement: null for host
  // workers.
  // coherent: the blocks are replicated (coherence_sync ops).
  ShadowPlanOps(const RefreshSchedule& schedule, std::vector<int> blocks_per_layer, ShadowDelay delay,
                const RootJobPlacement* placement = nullptr, bool coherent = false);
  // After the last backward (its reductions already queued on the comm lane): the step's
  // coherence syncs, and (two batches) the root-job parts of refreshes opened at earlier steps,
  // so that both overlap the last gradient reductions, which clip_grads waits for.
  void backward(PlanBuilder& b, int layer, int micro) override;
  void optimizer(PlanBuilder& b, int layer) override;
  void after_optimizer_part(PlanBuilder& b, int layer, BlockRange part) override;
  // The parts of the refreshes opened at this step (after their snapshots), with one batch
  // all the step's parts.
  void step_end(PlanBuilder& b) override;

  // A root_jobs op's Op::block: which of the step's placed tasks it runs.
  static constexpr int kEarlierRefreshes = 0;   // opened at an earlier step (before clip_grads)
  static constexpr int kThisStepsRefreshes = 1; // opened at this step (at its end)
  static constexpr int kAllRefreshes = 2;       // all (one batch, at its end)
  // Whether a root_jobs op of `step` of kind `which` runs task t.
  static bool runs(int which, int64_t step, const PlacedTask& t) {
    return which == kAllRefreshes || (t.opened == step) == (which == kThisStepsRefreshes);
  }
  // --print-plan detail of a root_jobs op: its jobs and their publish steps.
  std::string describe(const Op& op, const std::vector<std::string>& layer_names) const;

 private:
  const RefreshSchedule& schedule_;
  std::vector<int> blocks_;
  ShadowDelay delay_;
  const RootJobPlacement* placement_;
  bool coherent_;
  mutable std::vector<PlacedTask> tasks_;
  // Whether refreshes of `layer` publish at `step` (a publish_wait, and with replicas a sync).
  bool publishes(int layer, int64_t step) const;
  // Adds the root_jobs op of `step`'s tasks of one kind (kEarlierRefreshes, ...).
  void add_batch(PlanBuilder& b, int which);
};

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

// Stateful ("shadow"): the open refreshes, computed to the end, and with coherence the kept
// versions (fields in shadow_state.cpp). Saving computes every open refresh to the end (with
// coherence, after prepare_checkpoint). Loading keeps this rank's blocks (a sharded run) and
// puts their refreshes back, to install at their publish steps.
class ShadowPipeline final : public RefreshPolicy, public Stateful {
 public:
  // pool: the host workers, or null to run the root jobs on the compute lane (with as many
  // threads as OpenMP has now). worker_delay_s: each root job first sleeps this long (tests:
  // slow workers).
  // coherence: the replicas' protocol, or null (no replicas of this rank's blocks).
  // in_place: the workers compute each job by the block backend's own solvers
  // (BlockPreconditioner::compute_refresh_in_place: cuSOLVER on the device, on a low-priority
  // stream of each worker's; runtime.shadow.lane device) instead of the host's matrix functions.
  // Either way a job's result depends only on its snapshot.
  // gradient_reductions: the step has gradient collectives (several ranks), which the compute
  // lane's root jobs of earlier refreshes overlap (RootJobPlacement's two batches).
  ShadowPipeline(SecondOrderOptimizer& opt, WorkerPool* pool, ShadowDelay delay, double worker_delay_s = 0,
                 Coherence* coherence = nullptr, bool in_place = false, bool gradient_reductions = false);
  ~ShadowPipeline() override;

  void bind(Executor& ex);
  PlanContributor& plan_ops() { return *plan_ops_; }

  // runtime.shadow.resident_jobs: at most `jobs` refresh jobs' buffers in memory (0: as many as
  // are in flight); a job that waits while another needs buffers is parked in `file` (the disk
  // tier's directory; shadow_job_store.hpp) and read back when it is needed: the one furthest
  // from its publish step first. The results are the same bits. Between steps only (a run's
  // re-placement may lower it: jobs beyond it are parked and their buffers freed now). The
  // least that never parks a job in use is the compute threads (or workers) + 2 (a snapshot, a
  // publish); fewer still works, holding more jobs for a moment (counted: over_budget).
  void set_resident_jobs(int jobs, const std::string& file);
  int resident_jobs() const { return resident_jobs_; }

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
  struct Slot {
    int layer = 0, block = 0;
    int64_t opened = 0;          // the step whose factors it is computed from
    int64_t publish_step = 0;
    bool synced = false;         // coherence: its coherence_sync ran (ship: the decision)
    bool ship = false;
    SlotState state = SlotState::AwaitingSnapshot;
    int parts_done = 0;   // Snapshotted with parts_done > 0: computed in part (compute lane)
    RefreshJob job;
    // Guarded by store_mu_: whether job's arrays hold buffers (lent while it is held or waits in
    // memory), where its image is while parked, and how many hold it now.
    bool has_buffers = false;
    ParkedImage parked;
    int pins = 0;
  };
  using SlotPtr = std::shared_ptr<Slot>;
  struct BlockQueue {
    std::deque<SlotPtr> slots;       // ordered by publish step
  };

  // A free slot, without buffers (its job's buffers are lent by hold: recycled from any block,
  // the pipeline holds as many as are in flight at once, or resident_jobs, not one per block,
  // which for OLMo-1B SOAP would be 36 GiB of fp64 buffers).
  SlotPtr acquire();
  // The slot's job in memory while its holder uses it: buffers lent (a spare, new ones within
  // resident_jobs, or a waiting job's, which is parked), its image read back if parked.
  void hold(Slot& slot);
  void let_go(Slot& slot);
  // A slot done with: its buffers back to the spares, its image (if parked) dropped, the slot free.
  void release(const SlotPtr& slot);
  // store_mu_ held: parks the waiting job with buffers furthest from its publish step and moves
  // its buffers into `into`; false when every job with buffers is held.
  bool park_one(RefreshJob* into);
  // The spare buffer set to lend a block of rows x cols (store_mu_ held); spares_ not empty.
  size_t best_fitting_spare(int64_t rows, int64_t cols) const;
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
  std::unique_ptr<ShadowPlanOps> plan_ops_;
  // The job store (set_resident_jobs): lock order store_mu_, then mu_.
  std::mutex store_mu_;
  std::unique_ptr<ShadowJobStore> store_;
  int resident_jobs_ = 0;
  int buffer_sets_ = 0;                 // lent to slots or spare
  std::vector<RefreshJob> spares_;
  int64_t over_budget_ = 0;             // buffers lent beyond resident_jobs (every job held)
  uint64_t reported_written_ = 0, reported_read_ = 0;
  double park_s_ = 0;                   // time in the store's I/O since the last metrics
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
