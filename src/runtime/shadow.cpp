#include "runtime/shadow.hpp"

#include <omp.h>

#include <chrono>
#include <exception>
#include <thread>
#include <utility>

#include "core/error.hpp"
#include "core/timer.hpp"

namespace asteria {

ShadowPipeline::ShadowPipeline(SecondOrderOptimizer& opt, const ShadowOptions& options)
    : opt_(opt), pool_(options.pool), coherence_(options.coherence), track_change_(options.coherence != nullptr),
      delay_(options.delay), worker_delay_s_(options.worker_delay_s), in_place_(options.in_place),
      buffers_(opt, [this](std::vector<JobBuffers::Candidate>& c) { classify_waiting(c); }) {
  WorkerPool* pool = options.pool;
  const ShadowDelay delay = options.delay;
  ASTERIA_ASSERT(delay.delay >= 0 && delay.sync_steps >= 0);
  ASTERIA_ASSERT(!in_place_ || pool, "the shadow pipeline's in-place refreshes need workers");
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
    placement_ = std::make_unique<RootJobPlacement>(opt.schedule(), costs, delay, threads, options.gradient_reductions);
  }
  plan_ops_ = std::make_unique<ShadowPlanOps>(opt.schedule(), std::move(counts), delay, placement_.get(), coherence_ != nullptr);
  opt_.set_refresh_policy(this);
  name_registry_blocks();
  if (options.resident_jobs > 0) buffers_.set_resident_jobs(options.resident_jobs, options.jobs_file);
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

void ShadowPipeline::enqueue(const SlotPtr& slot) {
  slot->queued = ++queue_pushes_;
  queues_[slot->layer][slot->block].slots.push_back(slot);
}

void ShadowPipeline::classify_waiting(std::vector<JobBuffers::Candidate>& candidates) const {
  std::lock_guard<std::mutex> lock(mu_);
  for (JobBuffers::Candidate& c : candidates) {
    const Slot& s = static_cast<const Slot&>(*c.loan);   // every loan of buffers_ is a slot
    // Waiting: in a queue, and snapshotted (for its next part), computed, or a replica's version.
    // (A slot out of the queues is in its holder's hands: a D = 0 refresh, or one publishing.)
    c.waiting = s.queued > 0 && s.state != SlotState::Computing && s.state != SlotState::AwaitingSnapshot;
    c.finished = s.state != SlotState::Snapshotted;
    // A block's queue is in push order, so this is the slot's queue position among its block's.
    c.order = s.queued;
  }
}

void ShadowPipeline::release(const SlotPtr& slot) {
  buffers_.release(*slot);
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
  buffers_.hold(*slot);
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
  buffers_.let_go(*slot);
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
    buffers_.hold(*slot);
    pc.publish(slot->job);
    buffers_.let_go(*slot);
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
    buffers_.hold(*slot);
    pc.publish(slot->job);
    buffers_.let_go(*slot);
    ++published_;
  }
}

void ShadowPipeline::sync_slot(int layer, int block, Slot& slot) {
  buffers_.hold(slot);
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
  buffers_.let_go(slot);
}

void ShadowPipeline::take_snapshot(int layer, int block, const BlockPreconditioner& pc, Slot& slot) {
  buffers_.hold(slot);
  pc.snapshot(slot.job);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (coherence_ && kept_[layer][block].rows > 0) pc.continue_from(kept_[layer][block], slot.job);
  }
  if (track_change_) pc.snapshot_installed(slot.job);
  buffers_.let_go(slot);
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
      q.slots.front()->queued = 0;
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
  enqueue(slot);
}

bool ShadowPipeline::exchanges_at(int layer, int block, int64_t step, bool due) const {
  if (!coherence_) return false;
  if (due && delay_.at(step) == 0) return true;
  std::lock_guard<std::mutex> lock(mu_);
  for (const SlotPtr& s : queues_[layer][block].slots)
    if (s->publish_step <= step && !s->synced) return true;
  return false;
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
        buffers_.hold(*s);
        coherence_->send_to(l, b, 0, s->job);
        buffers_.let_go(*s);
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
