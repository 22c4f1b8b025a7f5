#include "fsdp/param_offload_plan_ops.hpp"

#include <algorithm>

#include "core/error.hpp"

namespace asteria {

ParamOffloadPlanOps::ParamOffloadPlanOps(std::vector<bool> on_disk, int prefetch_distance)
    : on_disk_(std::move(on_disk)), distance_(std::max(0, prefetch_distance)) {}

int ParamOffloadPlanOps::buffers(int prefetch_distance, int offloaded_layers) {
  return std::max(1, std::min(std::max(0, prefetch_distance) + 1, offloaded_layers));
}

void ParamOffloadPlanOps::plan_uses(const StepShape& shape) {
  uses_.clear();
  const int L = shape.num_layers;
  ASTERIA_ASSERT(static_cast<int>(on_disk_.size()) == L, "parameters on disk: ", on_disk_.size(), " layers, the step has ", L);
  for (int m = 0; m < shape.micro_batches; ++m) {
    for (int l = 0; l < L; ++l)
      if (on_disk_[l]) uses_.push_back({l, m});
    for (int l = L - 1; l >= 0; --l)
      if (on_disk_[l]) uses_.push_back({l, m});
  }
  for (int l = L - 1; l >= 0; --l)
    if (on_disk_[l]) uses_.push_back({l, -1});
  // A layer stays in memory between two of its uses at most d + 1 uses apart; else it is freed
  // after the first and loaded again for the second.
  const long window = distance_ + 1;
  std::vector<long> seen(static_cast<size_t>(L), -1);
  for (size_t i = 0; i < uses_.size(); ++i) {
    long& prev = seen[static_cast<size_t>(uses_[i].layer)];
    uses_[i].load = prev < 0 || static_cast<long>(i) - prev > window;
    prev = static_cast<long>(i);
  }
  std::fill(seen.begin(), seen.end(), -1);
  for (size_t i = uses_.size(); i-- > 0;) {
    long& next = seen[static_cast<size_t>(uses_[i].layer)];
    uses_[i].free = next < 0 || next - static_cast<long>(i) > window;
    next = static_cast<long>(i);
  }
  next_ = 0;
}

void ParamOffloadPlanOps::add_load(PlanBuilder& b, size_t use) {
  Op op;
  op.kind = OpKind::ParamLoad;
  op.lane = Lane::Staging;
  op.layer = uses_[use].layer;
  op.micro = uses_[use].micro;
  op.writes = {{StateKind::Params, op.layer}};
  b.add(std::move(op));
}

void ParamOffloadPlanOps::micro_begin(PlanBuilder& b, int micro) {
  if (micro != 0) return;
  plan_uses(b.shape());
  for (size_t j = 0; j < uses_.size() && j <= static_cast<size_t>(distance_); ++j)
    if (uses_[j].load) add_load(b, j);
}

void ParamOffloadPlanOps::end_use(PlanBuilder& b, int layer, int micro, int ended_by) {
  ASTERIA_ASSERT(next_ < uses_.size() && uses_[next_].layer == layer && uses_[next_].micro == micro,
                 "parameters on disk: use ", next_, " of the plan is not layer ", layer, " (micro-batch ", micro, ")");
  const Use& u = uses_[next_];
  if (u.free) {
    Op op;
    op.layer = layer;
    op.micro = micro;
    if (micro >= 0) {   // a forward or backward read it: nothing to write
      op.kind = OpKind::ParamRelease;
      op.deps = {ended_by};
      op.writes = {{StateKind::Params, layer}};
    } else {            // the optimizer step changed it
      op.kind = OpKind::ParamStore;
      op.lane = Lane::Staging;
      op.deps = {ended_by};
      op.reads = {{StateKind::Params, layer}};
    }
    b.add(std::move(op));
  }
  const size_t ahead = next_ + static_cast<size_t>(distance_) + 1;
  if (ahead < uses_.size() && uses_[ahead].load) add_load(b, ahead);
  ++next_;
}

void ParamOffloadPlanOps::forward(PlanBuilder& b, int layer, int micro) {
  if (on_disk_[layer]) end_use(b, layer, micro, b.find(OpKind::Forward, layer, micro));
}

void ParamOffloadPlanOps::backward(PlanBuilder& b, int layer, int micro) {
  if (on_disk_[layer]) end_use(b, layer, micro, b.find(OpKind::Backward, layer, micro));
}

void ParamOffloadPlanOps::after_optimizer_part(PlanBuilder& b, int layer, BlockRange part) {
  if (on_disk_[layer] && part.end < 0) end_use(b, layer, -1, b.find(OpKind::OptimStep, layer));   // its last part
}

}  // namespace asteria
