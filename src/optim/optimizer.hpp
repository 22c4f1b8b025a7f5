#pragma once
// The optimizer interface. An optimizer owns the state of every layer it was built for and
// updates one layer at a time (the plan schedules one OptimStep per layer, in reverse layer
// order so that later issues can overlap it with backward).
//
// step_layer: params -= update(grad * grad_scale), for the layer's whole flat buffer, at
// learning rate `lr` and 1-based optimizer step `step`. grad_scale carries the global-norm clip.
// step_part: the same for the preconditioner blocks [first, end) of the layer only (the tiers
// move a large layer's state in parts, tier_layout.hpp); the part with first 0 also updates the
// layer's unpreconditioned (1-D) parameters. Stepping every part of a layer, in order, gives
// the bits of step_layer.
//
// State memory: an optimizer built with own_memory binds its state tensors itself; otherwise
// the caller binds every tensor of layer_states(l) (the tiered state manager) and guarantees
// that they are resident while step_layer(l) runs.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/stateful.hpp"
#include "model/param_table.hpp"
#include "optim/state_tensor.hpp"
#include "optim/block_range.hpp"

namespace asteria {

// A tensor stored inside a state tensor, as a checkpoint names it: a global name that depends on
// neither the rank nor the memory layout, its global shape, where it starts in the state tensor,
// and for the state of a preconditioner block the block's place in the unsharded parameter
// (row0, rows, col0, cols; empty otherwise), so a loader can move whole blocks between ranks.
struct StatePiece {
  std::string name;              // "optim/adamw/blocks.0.norm_att/m"
  std::vector<int64_t> shape;
  size_t offset = 0;             // floats from the start of the state tensor
  std::vector<int64_t> block;
  // tensor_rows > 0: the piece is rows [row0, row0 + shape[0]) of a tensor of tensor_rows rows
  // (a shard's row-block of it), stored as "<name>/rows_<first>_<end>".
  int64_t row0 = 0, tensor_rows = 0;
  size_t count() const {
    size_t n = 1;
    for (int64_t d : shape) n *= static_cast<size_t>(d);
    return n;
  }
};

// State of the optimizer that is not a tensor (per-block step and failure counters), under
// global names.
struct OptimizerCounters {
  std::string name;
  std::vector<int64_t> values;
};

// Stateful ("optim"): the counters, one field "counters.<name>" each (AdamW has none; its state is
// all tensors, which checkpoints take through state_pieces). Loading reads the counters this
// optimizer has by name, so a sharded rank finds its blocks' among every rank's.
class Optimizer : public Stateful {
 public:
  ~Optimizer() override = default;
  virtual void step_layer(int layer, float* params, const float* grads, float grad_scale,
                          double lr, int64_t step) = 0;
  // An optimizer without blocks (AdamW) has one part per layer.
  virtual void step_part(int layer, BlockRange blocks, float* params, const float* grads, float grad_scale, double lr,
                         int64_t step) {
    ASTERIA_ASSERT(blocks.whole(), "layer ", layer, ": this optimizer steps whole layers only");
    step_layer(layer, params, grads, grad_scale, lr, step);
  }
  virtual size_t state_bytes() const = 0;
  // Layer l's state tensors; their specs equal optimizer_state_specs() (train/optimizer_factory).
  virtual std::vector<StateTensor*> layer_states(int layer) = 0;
  // For checkpoints: the pieces of each tensor of layer_states(l), in that order; together the
  // pieces of a tensor cover it whole.
  virtual std::vector<std::vector<StatePiece>> state_pieces(int layer) const = 0;
  virtual std::vector<OptimizerCounters> counters() const { return {}; }
  // Sets every counter from `saved` (by name); a counter missing from it is an Error.
  virtual void restore_counters(const std::vector<OptimizerCounters>& saved) {}

  std::string state_name() const override { return "optim"; }
  void save_state(StateWriter& out) override;
  void load_state(const StateReader& in) override;
};

// The checkpoint name of a parameter tensor's state piece: `prefix/entry[/suffix]`.
inline std::string state_piece_name(const std::string& prefix, const std::string& entry, const std::string& suffix = "") {
  return prefix + "/" + entry + (suffix.empty() ? "" : "/" + suffix);
}

}  // namespace asteria
