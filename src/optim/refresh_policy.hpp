#pragma once
// Where and when a block's refresh (inverse roots / eigenbasis) runs, decided at the block's
// refresh point (see preconditioner.hpp). Native mode refreshes inline, as the reference
// implementations do; the shadow pipeline (runtime/shadow.hpp) snapshots the factors, computes
// on host workers and publishes at a step fixed in advance.
#include <cstdint>

#include "optim/preconditioner.hpp"

namespace asteria {

class RefreshPolicy {
 public:
  virtual ~RefreshPolicy() = default;
  // Called at the refresh point of block `block` of layer `layer` during optimizer step `step`;
  // `due`: the block's refresh is scheduled now. `job` and `ws` are the calling thread's scratch.
  // Called from the optimizer's thread team (any order over blocks), except for the blocks
  // exchanges_at names, which the calling thread runs after the team, in block order.
  virtual void at_refresh_point(int layer, int block, BlockPreconditioner& pc, int64_t step, bool due,
                                RefreshJob& job, matfn::Workspace& ws) = 0;
  // Whether at_refresh_point computes a due refresh itself (the expensive part) rather than
  // handing it elsewhere.
  virtual bool refreshes_inline() const = 0;
  // Whether the refresh point of (layer, block) at `step` talks to other ranks (a replicated
  // block's version exchanged there): such a block must not run in a thread team, whose order
  // over blocks differs between ranks and runs.
  virtual bool exchanges_at(int layer, int block, int64_t step, bool due) const { return false; }
};

// Synchronous refresh when due (runtime.mode native), computed where the block's state lives.
class InlineRefresh final : public RefreshPolicy {
 public:
  void at_refresh_point(int, int, BlockPreconditioner& pc, int64_t, bool due, RefreshJob& job,
                        matfn::Workspace& ws) override {
    if (!due) return;
    pc.snapshot(job);
    pc.compute_refresh_in_place(job, ws);
    pc.publish(job);
  }
  bool refreshes_inline() const override { return true; }
};

}  // namespace asteria
