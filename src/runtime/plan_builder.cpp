#include "runtime/plan_builder.hpp"

#include "core/error.hpp"

namespace asteria {

void PlanBuilder::build(const StepShape& shape, Plan& plan) {
  shape_ = shape;
  plan_ = &plan;
  plan.ops.clear();
  latest_.assign(static_cast<size_t>(kNumOpKinds) * (shape.num_layers + 2) * (shape.micro_batches + 2), -1);
  plan.step = shape.step;
  plan.micro_batches = shape.micro_batches;
  const int L = shape.num_layers;
  for (int m = 0; m < shape.micro_batches; ++m) {
    for (auto* c : contributors_) c->micro_begin(*this, m);
    for (int l = 0; l < L; ++l)
      for (auto* c : contributors_) c->forward(*this, l, m);
    for (int l = L - 1; l >= 0; --l)
      for (auto* c : contributors_) c->backward(*this, l, m);
  }
  for (auto* c : contributors_) c->optimizer_begin(*this);
  static const std::vector<BlockRange> kWhole{BlockRange{}};
  for (int l = L - 1; l >= 0; --l) {
    for (auto* c : contributors_) c->optimizer(*this, l);
    for (const BlockRange& part : shape.optimizer_parts ? (*shape.optimizer_parts)[l] : kWhole) {
      for (auto* c : contributors_) c->optimizer_part(*this, l, part);
      for (auto* c : contributors_) c->after_optimizer_part(*this, l, part);
    }
  }
  for (auto* c : contributors_) c->step_end(*this);
  plan_ = nullptr;
}

namespace {

// An op's layer and micro are >= -1 (-1: none); "any" is below them.
constexpr int kAny = -2;

}  // namespace

size_t PlanBuilder::slot(OpKind kind, int layer, int micro) const {
  const size_t layers = static_cast<size_t>(shape_.num_layers) + 2, micros = static_cast<size_t>(shape_.micro_batches) + 2;
  return (static_cast<size_t>(kind) * layers + static_cast<size_t>(layer + 2)) * micros + static_cast<size_t>(micro + 2);
}

int PlanBuilder::add(Op op) {
  ASTERIA_ASSERT(plan_ != nullptr, "PlanBuilder::add outside build()");
  op.id = static_cast<int>(plan_->ops.size());
  for (int d : op.deps)
    ASTERIA_ASSERT(d >= 0 && d < op.id, "op ", to_string(op.kind), " depends on missing op ", d);
  ASTERIA_ASSERT(op.layer >= -1 && op.layer < shape_.num_layers && op.micro >= -1 && op.micro < shape_.micro_batches,
                 "op ", to_string(op.kind), " of layer ", op.layer, ", micro-batch ", op.micro, " outside the step's shape");
  for (int layer : {op.layer, kAny})
    for (int micro : {op.micro, kAny}) latest_[slot(op.kind, layer, micro)] = op.id;
  plan_->ops.push_back(std::move(op));
  return plan_->ops.back().id;
}

int PlanBuilder::find(OpKind kind, int layer, int micro) const {
  if (layer >= shape_.num_layers || micro >= shape_.micro_batches) return -1;
  return latest_[slot(kind, layer < 0 ? kAny : layer, micro < 0 ? kAny : micro)];
}

std::vector<int> PlanBuilder::find_all(OpKind kind) const {
  std::vector<int> ids;
  for (const Op& op : plan_->ops)
    if (op.kind == kind) ids.push_back(op.id);
  return ids;
}

}  // namespace asteria
