#include "runtime/plan_builder.hpp"

#include "core/error.hpp"

namespace asteria {

void PlanBuilder::build(const StepShape& shape, Plan& plan) {
  shape_ = shape;
  plan_ = &plan;
  plan.ops.clear();
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

int PlanBuilder::add(Op op) {
  ASTERIA_ASSERT(plan_ != nullptr, "PlanBuilder::add outside build()");
  op.id = static_cast<int>(plan_->ops.size());
  for (int d : op.deps)
    ASTERIA_ASSERT(d >= 0 && d < op.id, "op ", to_string(op.kind), " depends on missing op ", d);
  plan_->ops.push_back(std::move(op));
  return plan_->ops.back().id;
}

int PlanBuilder::find(OpKind kind, int layer, int micro) const {
  const auto& ops = plan_->ops;
  for (int i = static_cast<int>(ops.size()) - 1; i >= 0; --i) {
    const Op& op = ops[i];
    if (op.kind == kind && (layer < 0 || op.layer == layer) && (micro < 0 || op.micro == micro))
      return i;
  }
  return -1;
}

std::vector<int> PlanBuilder::find_all(OpKind kind) const {
  std::vector<int> ids;
  for (const Op& op : plan_->ops)
    if (op.kind == kind) ids.push_back(op.id);
  return ids;
}

}  // namespace asteria
