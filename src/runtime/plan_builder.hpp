#pragma once
// Builds the plan of one step by walking the model's layer sequence and asking every
// contributor to add its ops at each point of the walk:
//
//   for m in micro-batches:  micro_begin(m)
//                            forward(l, m)   for l = 0 .. L-1
//                            backward(l, m)  for l = L-1 .. 0
//   optimizer_begin()
//   for l = L-1 .. 0:        optimizer(l)
//                            optimizer_part(l, r), after_optimizer_part(l, r)   for each part r of l
//   step_end()
// A layer is one part (BlockRange whole) unless the step's shape cuts it (the tiers' units).
//
// Contributors are called in registration order at each point (model, fsdp, optimizer, tiers,
// shadow, coherence in later issues). Each adds ops with PlanBuilder::add and wires
// dependencies through find(); add() checks that every dependency already exists, so the op
// list is always a valid compute-lane order.
#include <cstddef>
#include <vector>

#include "runtime/plan.hpp"

namespace asteria {

class PlanBuilder;

struct StepShape {
  int64_t step = 0;
  int num_layers = 0;
  int micro_batches = 1;
  // Per layer, the parts its optimizer step is cut into (TierLayout::parts); null: whole layers.
  const std::vector<std::vector<BlockRange>>* optimizer_parts = nullptr;
};

class PlanContributor {
 public:
  virtual ~PlanContributor() = default;
  virtual void micro_begin(PlanBuilder&, int micro) {}
  virtual void forward(PlanBuilder&, int layer, int micro) {}
  virtual void backward(PlanBuilder&, int layer, int micro) {}
  virtual void optimizer_begin(PlanBuilder&) {}
  virtual void optimizer(PlanBuilder&, int layer) {}
  virtual void optimizer_part(PlanBuilder&, int layer, BlockRange part) {}
  virtual void after_optimizer_part(PlanBuilder&, int layer, BlockRange part) {}
  virtual void step_end(PlanBuilder&) {}
};

class PlanBuilder {
 public:
  void add_contributor(PlanContributor* c) { contributors_.push_back(c); }
  // Builds into `plan` (its op vector's capacity is reused from step to step).
  void build(const StepShape& shape, Plan& plan);

  const StepShape& shape() const { return shape_; }
  // Appends an op; returns its id.
  int add(Op op);
  // Id of the latest op of this kind for (layer, micro), or -1. layer/micro -1 match any.
  // Constant time (an index kept by add): a step of many micro-batches has tens of thousands
  // of ops, and each looks up its dependencies.
  int find(OpKind kind, int layer = -1, int micro = -1) const;
  // Ids of all ops of a kind (e.g. every GradNorm before the clip).
  std::vector<int> find_all(OpKind kind) const;
  const Op& op(int id) const { return plan_->ops[static_cast<size_t>(id)]; }

 private:
  std::vector<PlanContributor*> contributors_;
  StepShape shape_;
  Plan* plan_ = nullptr;
  // The latest op id of each (kind, layer, micro), either or both of them also as "any"
  // (slot()), -1 for none: a dense table, refilled each build, allocated when the shape grows.
  std::vector<int> latest_;
  size_t slot(OpKind kind, int layer, int micro) const;
};

}  // namespace asteria
