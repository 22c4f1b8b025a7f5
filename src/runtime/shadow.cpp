#include "runtime/shadow.hpp"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <exception>
#include <thread>

#include "core/error.hpp"
#include "core/timer.hpp"

namespace asteria {

ShadowPipeline::ShadowPipeline(SecondOrderOptimizer& opt, WorkerPool* pool, ShadowDelay delay, double worker_delay_s,
                               Coherence* coherence, bool in_place, bool gradient_reductions)
    : opt_(opt), pool_(pool), coherence_(coherence),
      track_change_(coherence != nullptr), delay_(delay), worker_delay_s_(worker_delay_s), in_place_(in_place) {
  ASTERIA_ASSERT(delay.delay >= 0 && delay.sync_steps >= 0);
  ASTERIA_ASSERT(!in_place || pool, "the shadow pipeline's in-place refreshes need workers");
  std::vector<std::vector<MatrixBlock>> blocks;
  std::vector<int> counts;
  for (int l = 0; l < opt.num_layers(); ++l) {
    blocks.push_back(opt.blocks(l));
    counts.push_back(static_cast<int>(blocks.back().size()));
    queues_.emplace_back(blocks.back().size());
    kept_.emplace_back(blocks.back().size());
  }
  const int threads = pool ? pool->size() : omp_get_max_threads();
  for (int w = 0; w < threads; ++w) worker_ws_.push_back(std::make_unique<matfn::Workspace>());
  if (!pool && delay.delay > 0) {
    RootJobPlacement::PartCosts costs = refresh_part_costs(opt.algorithm(), blocks);
    for (int l = 0; l < opt.num_layers(); ++l)
      for (int b = 0; b < counts[l]; ++b)
        ASTERIA_ASSERT(static_cast<int>(costs[l][b].size()) == opt.preconditioner(l, b).refresh_parts(),
                       "refresh_part_costs disagrees with ", blocks[l][b].name, "'s refresh parts");
    placement_ = std::make_unique<RootJobPlacement>(opt.schedule(), costs, delay, threads, gradient_reductions);
  }
  plan_ops_ = std::make_unique<ShadowPlanOps>(opt.schedule(), std::move(counts), delay, placement_.get(), coherence != nullptr);
  opt_.set_refresh_policy(this);
  name_registry_blocks();
}

ShadowPipeline::~ShadowPipeline() {
  if (pool_) pool_->drain();  // jobs hold pointers into this object
  opt_.set_refresh_policy(nullptr);
}

ShadowPipeline::SlotPtr ShadowPipeline::acquire() {
  if (free_.empty()) return std::make_shared<Slot>();
  SlotPtr s = free_.back();
  free_.pop_back();
  return s;
}

void ShadowPipeline::set_resident_jobs(int jobs, const std::string& file) {
  std::lock_guard<std::mutex> lock(store_mu_);
  resident_jobs_ = std::max(0, jobs);
  if (resident_jobs_ > 0 && !store_) store_ = std::make_unique<ShadowJobStore>(file);
  // Lowered: the buffers beyond it freed now (spares first, then waiting jobs', parked).
  while (resident_jobs_ > 0 && buffer_sets_ > resident_jobs_) {
    RefreshJob freed;
    if (!spares_.empty()) {
      spares_.pop_back();
    } else if (!park_one(&freed)) {
      break;   // every job with buffers is held (not between steps)
    }
    --buffer_sets_;
  }
}

bool ShadowPipeline::park_one(RefreshJob* into) {
  if (!store_) return false;
  Slot* victim = nullptr;
  bool finished = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& layer : queues_)
      for (const BlockQueue& q : layer)
        for (const SlotPtr& s : q.slots)
          // Waiting: snapshotted (for its next part), computed, or a replica's version.
          if (s->has_buffers && s->pins == 0 && s->state != SlotState::Computing &&
              s->state != SlotState::AwaitingSnapshot && (!victim || s->publish_step > victim->publish_step)) {
            victim = s.get();
            finished = s->state != SlotState::Snapshotted;
          }
  }
  if (!victim) return false;
  Timer t;
  store_->park(victim->job, finished, victim->parked, opt_.blocks(victim->layer)[victim->block].name);
  park_s_ += t.seconds();
  swap_refresh_job_arrays(*into, victim->job);
  victim->has_buffers = false;
  return true;
}

size_t ShadowPipeline::best_fitting_spare(int64_t rows, int64_t cols) const {
  // The spare whose factors' arrays already hold this block's with the least room to spare, else
  // the largest: a set grows (fresh memory, slow to touch) only when no spare is large enough, so
  // the sets settle at once into the sizes of the jobs in flight instead of growing a little each
  // time a larger block draws a smaller set.
  const auto room = [&](const RefreshJob& j) {
    return static_cast<double>(j.left.capacity()) + static_cast<double>(j.right.capacity());
  };
  const auto fits = [&](const RefreshJob& j) {
    return j.left.capacity() >= static_cast<size_t>(rows * rows) && j.right.capacity() >= static_cast<size_t>(cols * cols);
  };
  const auto better = [&](const RefreshJob& a, const RefreshJob& b) {
    if (fits(a) != fits(b)) return fits(a);
    return fits(a) ? room(a) < room(b) : room(a) > room(b);
  };
  size_t best = 0;
  for (size_t i = 1; i < spares_.size(); ++i)
    if (better(spares_[i], spares_[best])) best = i;
  return best;
}

void ShadowPipeline::hold(Slot& slot) {
  std::lock_guard<std::mutex> lock(store_mu_);
  ++slot.pins;
  if (slot.has_buffers) return;
  if (!spares_.empty()) {
    const MatrixBlock& b = opt_.blocks(slot.layer)[slot.block];
    std::swap(spares_[best_fitting_spare(b.rows, b.cols)], spares_.back());
    swap_refresh_job_arrays(slot.job, spares_.back());
    spares_.pop_back();
  } else if (resident_jobs_ == 0 || buffer_sets_ < resident_jobs_ || !park_one(&slot.job)) {
    // New buffers (allocated as the job is filled): within the budget, or beyond it when every
    // job in memory is held.
    if (resident_jobs_ > 0 && buffer_sets_ >= resident_jobs_) ++over_budget_;
    ++buffer_sets_;
  }
  slot.has_buffers = true;
  if (slot.parked.on_disk) {
    Timer t;
    store_->unpark(slot.job, slot.parked, opt_.blocks(slot.layer)[slot.block].name);
    park_s_ += t.seconds();
  }
}

void ShadowPipeline::let_go(Slot& slot) {
  std::lock_guard<std::mutex> lock(store_mu_);
  ASTERIA_ASSERT(slot.pins > 0);
  --slot.pins;
}

void ShadowPipeline::release(const SlotPtr& slot) {
  {
    std::lock_guard<std::mutex> lock(store_mu_);
    ASTERIA_ASSERT(slot->pins == 0, "a refresh slot released while held");
    if (store_) store_->discard(slot->parked);
    if (slot->has_buffers) {
      RefreshJob buffers;
      swap_refresh_job_arrays(buffers, slot->job);
      slot->has_buffers = false;
      // Lent beyond the budget while every job was held: freed, not kept.
      if (resident_jobs_ > 0 && buffer_sets_ > resident_jobs_) {
        --buffer_sets_;
      } else {
        spares_.push_back(std::move(buffers));
      }
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  free_.push_back(slot);
}

void ShadowPipeline::wait_ready(const SlotPtr& slot) {
  std::unique_lock<std::mutex> lock(mu_);
  if (slot->state == SlotState::Ready) return;
  // On the compute lane every job runs at a step before its publish step: nothing to wait for.
  ASTERIA_ASSERT(pool_, "a root job placed on the compute lane had not run by its publish step ",
                 slot->publish_step);
  Timer t;
  ready_cv_.wait(lock, [&] { return slot->state == SlotState::Ready; });
  stall_s_ += t.seconds();
}

void ShadowPipeline::compute(int layer, int block, const SlotPtr& slot, int worker, int begin, int end) {
  const BlockPreconditioner& pc = opt_.preconditioner(layer, block);
  if (end < 0) end = pc.refresh_parts();
  hold(*slot);
  {
    std::lock_guard<std::mutex> lock(mu_);
    ASTERIA_ASSERT(slot->state == SlotState::Snapshotted && slot->parts_done == begin, "root job of ",
                   opt_.blocks(layer)[block].name, " started at part ", begin, " without its snapshot or after ",
                   slot->parts_done, " part(s)");
    slot->state = SlotState::Computing;
  }
  if (worker_delay_s_ > 0) std::this_thread::sleep_for(std::chrono::duration<double>(worker_delay_s_));
  // Pure: reads only the job, so the result does not depend on the worker or its timing.
  if (in_place_) {
    ASTERIA_ASSERT(begin == 0 && end == pc.refresh_parts(), "an in-place refresh runs whole");
    pc.backend().use_background_stream();
    pc.compute_refresh_in_place(slot->job, *worker_ws_[worker]);
  } else {
    for (int part = begin; part < end; ++part) pc.compute_refresh_part(slot->job, part, *worker_ws_[worker]);
  }
  // The owner's measure for the tolerance rule, from the job alone (pure, like the refresh).
  if (track_change_ && end == pc.refresh_parts()) slot->job.change = pc.refresh_change(slot->job);
  // Let go while still Computing (never parked then): a waiter that sees it Ready may release it.
  let_go(*slot);
  {
    std::lock_guard<std::mutex> lock(mu_);
    slot->parts_done = end;
    slot->state = end == pc.refresh_parts() ? SlotState::Ready : SlotState::Snapshotted;
  }
  if (end == pc.refresh_parts()) ++computed_;
  ready_cv_.notify_all();
}

void ShadowPipeline::submit(int layer, int block, const SlotPtr& slot) {
  pool_->submit([this, layer, block, slot](int worker) { compute(layer, block, slot, worker); });
}

void ShadowPipeline::run_batch(int64_t step, int which) {
  placement_->tasks_at(step, batch_);
  batch_slots_.clear();
  for (const PlacedTask& t : batch_) {
    if (!ShadowPlanOps::runs(which, step, t)) continue;
    SlotPtr slot = find_slot(t.layer, t.block, t.opened + delay_.delay);
    if (slot && slot->state == SlotState::Snapshotted) batch_slots_.emplace_back(t, std::move(slot));
  }
  const int n = static_cast<int>(batch_slots_.size());
  // An exception cannot leave an OpenMP region: the first one is kept and rethrown after it.
  std::exception_ptr error;
  // Inside the parallel region BLAS and LAPACK run on the calling thread only, as on a worker.
#pragma omp parallel for schedule(dynamic, 1)
  for (int i = 0; i < n; ++i) {
    try {
      const auto& [task, slot] = batch_slots_[i];
      compute(task.layer, task.block, slot, omp_get_thread_num(), task.begin, task.end);
    } catch (...) {
#pragma omp critical(asteria_shadow_batch_error)
      if (!error) error = std::current_exception();
    }
  }
  if (error) std::rethrow_exception(error);
}

ShadowPipeline::SlotPtr ShadowPipeline::find_slot(int layer, int block, int64_t publish_step) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const SlotPtr& s : queues_[layer][block].slots)
    if (s->publish_step == publish_step) return s;
  return nullptr;
}

void ShadowPipeline::publish_slot(int layer, int block, BlockPreconditioner& pc, const SlotPtr& slot) {
  if (!coherence_) {
    wait_ready(slot);
    hold(*slot);
    pc.publish(slot->job);
    let_go(*slot);
    ++published_;
    return;
  }
  // Replicated: the owner's version went to the others in this step's coherence_sync (a warm-up
  // refresh's goes now); all install it if shipped.
  if (!slot->synced) {
    if (coherence_->owns(layer, block)) wait_ready(slot);
    sync_slot(layer, block, *slot);
  }
  if (slot->ship) {
    hold(*slot);
    pc.publish(slot->job);
    let_go(*slot);
    ++published_;
  }
}

void ShadowPipeline::sync_slot(int layer, int block, Slot& slot) {
  hold(slot);
  slot.ship = coherence_->sync(layer, block, slot.opened, slot.job);
  slot.synced = true;
  if (coherence_->owns(layer, block)) {
    std::lock_guard<std::mutex> lock(mu_);
    RefreshJob& kept = kept_[layer][block];
    // Shipped: it is the installed state now. A failed refresh leaves the chain where it was.
    // (rows 0 marks none kept; the buffers stay for the next one.)
    if (slot.ship ||
        (slot.job.status == matfn::Status::Ok && !opt_.preconditioner(layer, block).keep_dropped(slot.job, kept)))
      kept.rows = 0;
  }
  let_go(slot);
}

void ShadowPipeline::take_snapshot(int layer, int block, const BlockPreconditioner& pc, Slot& slot) {
  hold(slot);
  pc.snapshot(slot.job);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (coherence_ && kept_[layer][block].rows > 0) pc.continue_from(kept_[layer][block], slot.job);
  }
  if (track_change_) pc.snapshot_installed(slot.job);
  let_go(slot);
}

void ShadowPipeline::at_refresh_point(int layer, int block, BlockPreconditioner& pc, int64_t step, bool due,
                                      RefreshJob&, matfn::Workspace&) {
  BlockQueue& q = queues_[layer][block];
  // 1. Install the results due at this step (in publish order).
  for (;;) {
    SlotPtr front;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (q.slots.empty() || q.slots.front()->publish_step > step) break;
      front = q.slots.front();
    }
    publish_slot(layer, block, pc, front);
    {
      std::lock_guard<std::mutex> lock(mu_);
      q.slots.pop_front();
    }
    release(front);
  }
  if (!due) return;
  // 2. Open a job; its snapshot is taken by the planned snapshot op after this layer's step
  // (with coherence, on the block's owner only: the others wait for its version).
  const bool remote = coherence_ && !coherence_->owns(layer, block);
  SlotPtr slot;
  {
    std::lock_guard<std::mutex> lock(mu_);
    slot = acquire();
    slot->layer = layer;
    slot->block = block;
    slot->opened = step;
    slot->publish_step = step + delay_.at(step);
    slot->synced = slot->ship = false;
    slot->state = remote ? SlotState::Remote : SlotState::AwaitingSnapshot;
    slot->parts_done = 0;
  }
  if (delay_.at(step) == 0) {  // the native schedule, computed on a worker or this thread
    if (!remote) {
      take_snapshot(layer, block, pc, *slot);
      {
        std::lock_guard<std::mutex> lock(mu_);
        slot->state = SlotState::Snapshotted;
      }
      if (pool_) {
        submit(layer, block, slot);
        wait_ready(slot);
      } else {
        compute(layer, block, slot, omp_get_thread_num());
      }
    }
    publish_slot(layer, block, pc, slot);
    release(slot);
    return;
  }
  std::lock_guard<std::mutex> lock(mu_);
  q.slots.push_back(slot);
}

bool ShadowPipeline::exchanges_at(int layer, int block, int64_t step, bool due) const {
  if (!coherence_) return false;
  if (due && delay_.at(step) == 0) return true;
  std::lock_guard<std::mutex> lock(mu_);
  for (const SlotPtr& s : queues_[layer][block].slots)
    if (s->publish_step <= step && !s->synced) return true;
  return false;
}

ShadowPlanOps::ShadowPlanOps(const RefreshSchedule& schedule, std::vector<int> blocks_per_layer, ShadowDelay delay,
                             const RootJobPlacement* placement, bool coherent)
    : schedule_(schedule), blocks_(std::move(blocks_per_layer)), delay_(delay), placement_(placement), coherent_(coherent) {}

void ShadowPlanOps::backward(PlanBuilder& b, int layer, int micro) {
  if (layer != 0 || micro != b.shape().micro_batches - 1) return;
  // Comm lane, after the step's last gradient reduction (the comm lane runs its ops in plan
  // order, and the backward waits for those): the versions publishing now, layer by layer in the
  // optimizer's order (the same on every replica).
  const int64_t step = b.shape().step;
  if (coherent_) {
    for (int l = static_cast<int>(blocks_.size()) - 1; l >= 0; --l) {
      if (!publishes(l, step)) continue;
      Op sync;
      sync.kind = OpKind::CoherenceSync;
      sync.lane = Lane::Comm;
      sync.layer = l;
      sync.tag = step;
      sync.reads = {{StateKind::Snapshot, l}};
      sync.writes = {{StateKind::Snapshot, l}};
      b.add(std::move(sync));
    }
  }
  if (placement_ && placement_->two_batches()) add_batch(b, kEarlierRefreshes);
}

bool ShadowPlanOps::publishes(int layer, int64_t step) const {
  // The refreshes publishing now were opened at step - D (after the synchronous warm-up).
  const int64_t opened = step - delay_.delay;
  if (delay_.delay == 0 || opened < 1 || delay_.at(opened) == 0) return false;
  for (int bi = 0; bi < blocks_[layer]; ++bi)
    if (schedule_.due(layer, bi, opened)) return true;
  return false;
}

void ShadowPlanOps::optimizer(PlanBuilder& b, int layer) {
  const int64_t step = b.shape().step;
  if (!publishes(layer, step)) return;
  Op op;
  op.kind = OpKind::PublishWait;
  op.layer = layer;
  op.tag = step;
  op.reads = {{StateKind::Snapshot, layer}};
  if (coherent_) op.deps = {b.find(OpKind::CoherenceSync, layer)};
  b.add(std::move(op));
}

void ShadowPlanOps::after_optimizer_part(PlanBuilder& b, int layer, BlockRange part) {
  const int64_t step = b.shape().step;
  const int64_t delay = delay_.at(step);
  if (delay == 0) return;
  std::vector<int> due;
  for (int bi = part.first; bi < part.end_in(blocks_[layer]); ++bi)
    if (schedule_.due(layer, bi, step)) due.push_back(bi);
  if (due.empty()) return;
  Op snap;
  snap.kind = OpKind::Snapshot;
  snap.lane = Lane::Staging;
  snap.layer = layer;
  snap.blocks = part;
  snap.tag = step + delay;
  snap.deps = {b.find(OpKind::OptimStep, layer)};
  snap.reads = {{StateKind::OptimState, layer}};
  snap.writes = {{StateKind::Snapshot, layer}};
  const int snap_id = b.add(std::move(snap));
  if (placement_) return;  // the jobs run in the step's root_jobs op (step_end)
  for (int bi : due) {
    Op job;
    job.kind = OpKind::RootJob;
    job.lane = Lane::Host;
    job.layer = layer;
    job.block = bi;
    job.tag = step + delay;
    job.deps = {snap_id};
    job.reads = {{StateKind::Snapshot, layer}};
    b.add(std::move(job));
  }
}

void ShadowPlanOps::step_end(PlanBuilder& b) {
  if (placement_) add_batch(b, placement_->two_batches() ? kThisStepsRefreshes : kAllRefreshes);
}

void ShadowPlanOps::add_batch(PlanBuilder& b, int which) {
  const int64_t step = b.shape().step;
  placement_->tasks_at(step, tasks_);
  Op batch;
  batch.kind = OpKind::RootJobBatch;
  batch.tag = step;
  batch.block = which;
  for (const PlacedTask& t : tasks_) {
    if (!runs(which, step, t)) continue;
    const StateRef snapshot{StateKind::Snapshot, t.layer};
    if (std::find(batch.reads.begin(), batch.reads.end(), snapshot) == batch.reads.end()) batch.reads.push_back(snapshot);
    // A task of a refresh opened at this step needs this step's snapshot of its block.
    if (t.opened == step) {
      int snap = -1;
      for (int id : b.find_all(OpKind::Snapshot))
        if (b.op(id).layer == t.layer && b.op(id).blocks.contains(t.block)) snap = id;
      ASTERIA_ASSERT(snap >= 0);
      if (std::find(batch.deps.begin(), batch.deps.end(), snap) == batch.deps.end()) batch.deps.push_back(snap);
    }
  }
  if (batch.reads.empty()) return;
  b.add(std::move(batch));
}

std::string ShadowPlanOps::describe(const Op& op, const std::vector<std::string>& layer_names) const {
  if (op.kind != OpKind::RootJobBatch || !placement_) return "";
  placement_->tasks_at(op.tag, tasks_);
  std::string s = "jobs:";
  for (const PlacedTask& t : tasks_)
    if (runs(op.block, op.tag, t))
      s += " " + layer_names[t.layer] + "/" + std::to_string(t.block) + "[parts " + std::to_string(t.begin) + "-" +
         std::to_string(t.end - 1) + "](publish_at=" + std::to_string(t.opened + delay_.delay) + ")";
  return s;
}

void ShadowPipeline::bind(Executor& ex) {
  ex.bind(OpKind::PublishWait, [this](const Op& op) {
    std::vector<SlotPtr> due;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (const BlockQueue& q : queues_[op.layer])
        for (const SlotPtr& s : q.slots)
          if (s->publish_step <= op.tag && s->state != SlotState::Remote) due.push_back(s);
    }
    for (const SlotPtr& s : due) wait_ready(s);
  });
  // The slots opened at this step (publishing at op.tag) are snapshotted after the layer's
  // optimizer step and before the next one (the executor finishes staging ops within the step).
  ex.bind(OpKind::Snapshot, [this](const Op& op) {
    for (int bi = op.blocks.first; bi < op.blocks.end_in(static_cast<int>(queues_[op.layer].size())); ++bi) {
      SlotPtr slot = find_slot(op.layer, bi, op.tag);
      if (!slot || slot->state != SlotState::AwaitingSnapshot) continue;
      take_snapshot(op.layer, bi, opt_.preconditioner(op.layer, bi), *slot);
      std::lock_guard<std::mutex> lock(mu_);
      slot->state = SlotState::Snapshotted;
    }
  });
  ex.bind(OpKind::RootJobBatch,
          [this](const Op& op) { run_batch(op.tag, op.block); });
  // Comm lane: the versions of the layer's blocks publishing at this step, in block order (the
  // same on every replica); the owner's wait for its job is shadow stall.
  ex.bind(OpKind::CoherenceSync, [this](const Op& op) {
    for (int bi = 0; bi < static_cast<int>(queues_[op.layer].size()); ++bi) {
      SlotPtr slot = find_slot(op.layer, bi, op.tag);
      if (!slot) continue;
      if (coherence_->owns(op.layer, bi)) wait_ready(slot);
      sync_slot(op.layer, bi, *slot);
    }
  });
  ex.bind_host(OpKind::RootJob, [this](const Op& op, int worker) {
    SlotPtr slot = find_slot(op.layer, op.block, op.tag);
    if (!slot || slot->state != SlotState::Snapshotted) return;  // the block's schedule moved at run time
    compute(op.layer, op.block, slot, worker);
  });
}

void ShadowPipeline::complete_open_refreshes() {
  struct Open {
    int layer, block;
    SlotPtr slot;
  };
  std::vector<Open> open;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (int l = 0; l < static_cast<int>(queues_.size()); ++l)
      for (int b = 0; b < static_cast<int>(queues_[l].size()); ++b)
        for (const SlotPtr& s : queues_[l][b].slots) {
          ASTERIA_ASSERT(s->state != SlotState::AwaitingSnapshot, "a refresh of ", opt_.blocks(l)[b].name,
                         " has no snapshot at the end of its step");
          if (s->state != SlotState::Remote) open.push_back({l, b, s});
        }
  }
  if (!pool_) {
    // The parts not run yet, in a parallel region as run_batch runs them, so that BLAS and
    // LAPACK run on one thread each and round as they would have.
    std::exception_ptr error;
    const int n = static_cast<int>(open.size());
#pragma omp parallel for schedule(dynamic, 1)
    for (int i = 0; i < n; ++i) {
      try {
        const Open& o = open[i];
        if (o.slot->state == SlotState::Snapshotted)
          compute(o.layer, o.block, o.slot, omp_get_thread_num(), o.slot->parts_done);
      } catch (...) {
#pragma omp critical(asteria_shadow_finish_error)
        if (!error) error = std::current_exception();
      }
    }
    if (error) std::rethrow_exception(error);
  }
  for (const Open& o : open) wait_ready(o.slot);
}

void ShadowPipeline::prepare_checkpoint() {
  if (!coherence_) return;
  complete_open_refreshes();
  // Every replica walks the same open refreshes (the schedule is global) in the same order.
  for (int l = 0; l < static_cast<int>(queues_.size()); ++l)
    for (int b = 0; b < static_cast<int>(queues_[l].size()); ++b)
      for (const SlotPtr& s : queues_[l][b].slots) {
        hold(*s);
        coherence_->send_to(l, b, 0, s->job);
        let_go(*s);
        if (coherence_->replica_rank() == 0) {
          std::lock_guard<std::mutex> lock(mu_);
          if (s->state == SlotState::Remote) s->state = SlotState::Ready;
        }
      }
  // And the owners' kept versions (rows 0, none kept, travels too: replica 0 may hold an old one).
  for (int l = 0; l < static_cast<int>(kept_.size()); ++l)
    for (int b = 0; b < static_cast<int>(kept_[l].size()); ++b) coherence_->send_to(l, b, 0, kept_[l][b]);
}

double ShadowPipeline::take_stall_seconds() {
  std::lock_guard<std::mutex> lock(mu_);
  double s = stall_s_;
  stall_s_ = 0;
  return s;
}

int ShadowPipeline::in_flight() const {
  std::lock_guard<std::mutex> lock(mu_);
  int n = 0;
  for (const auto& layer : queues_)
    for (const BlockQueue& q : layer) n += static_cast<int>(q.slots.size());
  return n;
}

}  // namespace asteria
