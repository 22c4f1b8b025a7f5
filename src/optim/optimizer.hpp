#pragma once
// The optimizer interface. An optimizer owns the state of every layer it was built for and
// updates one layer at a time (the plan schedules one OptimStep per layer, in reverse layer
// order so that later issues can overlap it with backward).
//
// step_layer: params -= update(grad * grad_scale), for the layer's whole flat buffer, at
// learning rate `lr` and 1-based optimizer step `step`. grad_scale carries the global-norm clip.
//
// State memory: an optimizer built with own_memory binds its state tensors itself; otherwise
// the caller binds every tensor of layer_states(l) (the tiered state manager) and guarantees
// that they are resident while step_layer(l) runs.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "model/param_table.hpp"
#include "optim/state_tensor.hpp"

namespace asteria {

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  virtual void step_layer(int layer, float* params, const float* grads, float grad_scale,
                          double lr, int64_t step) = 0;
  virtual size_t state_bytes() const = 0;
  // Layer l's state tensors; their specs equal optimizer_state_specs() (train/optimizer_factory).
  virtual std::vector<StateTensor*> layer_states(int layer) = 0;
};

}  // namespace asteria
