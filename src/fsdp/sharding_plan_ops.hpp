#pragma once
// The comm-lane ops of multi-rank training (see sharding.hpp), and the compute-lane releases
// that go with them, added to each micro-batch of a step's plan. With p = distributed.prefetch
// (capped at the layer count) and L layers:
//
// sharded (ZeRO-3: a rank holds whole layers only in flight)
//   forward   gather(0 .. p-1) at the micro-batch's start, then after forward(l): release(l)
//             and gather(l + p), so a gather runs while the compute lane works up to p layers
//             behind it. The last p layers (and, with a tied head, the embedding the head
//             reads) are not released: the backward starts with them.
//   backward  at backward(l): gather(l - p) (it runs beside backward(l): it needs only a
//             free buffer), then reduce_scatter(l) of the gradient and release(l) after it.
//             The embedding's backward reads no parameters: it is never gathered for it (the
//             tied head releases it).
//   Buffers in flight (LayerSlots): parameters p + 1 (+ 1 tied), gradients 2 (+ 1 tied: the
//   head's backward writes the embedding's gradient too). A buffer always frees by ops that
//   precede its waiter in its lane's order, so the blocking acquire cannot deadlock.
// replicated only (fsdp none): all_reduce(l) of the whole gradient after the last
// micro-batch's backward(l).
//
// Register after the model's contributor (its forward and backward ops come first at each
// point) and before the optimizer's (grad_norm waits for the reduction).
#include "runtime/plan_builder.hpp"

namespace asteria {

class ShardingPlanOps final : public PlanContributor {
 public:
  // sharded: the shard group has several ranks; reduces: there are several ranks at all.
  ShardingPlanOps(bool sharded, bool reduces, int prefetch, bool tied_head)
      : sharded_(sharded), reduces_(reduces), prefetch_(prefetch < 1 ? 1 : prefetch), tied_(tied_head) {}
  void micro_begin(PlanBuilder& b, int micro) override;
  void forward(PlanBuilder& b, int layer, int micro) override;
  void backward(PlanBuilder& b, int layer, int micro) override;

  // The whole-layer buffers a sharded step holds at most, for layers' parameters and gradients.
  static int param_buffers(int prefetch, int num_layers, bool tied_head);
  static int grad_buffers(bool tied_head) { return tied_head ? 3 : 2; }
  // Whether layer `layer` is gathered a second time, for its backward (else it is kept from the
  // forward, or it is the embedding, whose backward reads no parameters).
  static bool gathered_for_backward(int layer, int num_layers, int prefetch);

 private:
  int prefetch(const PlanBuilder& b) const;
  void add_gather(PlanBuilder& b, int layer, int micro);
  void add_release(PlanBuilder& b, int layer, int micro, int after);
  void add_reduction(PlanBuilder& b, OpKind kind, int layer, int micro, int after);
  bool sharded_, reduces_;
  int prefetch_;
  bool tied_;
};

}  // namespace asteria
