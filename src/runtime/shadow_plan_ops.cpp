#include "runtime/shadow_plan_ops.hpp"

#include <algorithm>
#include <utility>

#include "core/error.hpp"

namespace asteria {

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

}  // namespace asteria
