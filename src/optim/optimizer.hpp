#pragma once
// The optimizer interface. An optimizer owns the state of every layer it was built for and
// updates one layer at a time (the plan schedules one OptimStep per layer, in reverse layer
// order so that later issues can overlap it with backward).
//
// step_layer: params -= update(grad * grad_scale), for the layer's whole flat buffer, at
// learning rate `lr` and 1-based optimizer step `step`. grad_scale carries the global-norm clip.
#include <cstddef>
#include <cstdint>
#include <string>

#include "model/param_table.hpp"

namespace asteria {

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  virtual void step_layer(int layer, float* params, const float* grads, float grad_scale,
                          double lr, int64_t step) = 0;
  virtual size_t state_bytes() const = 0;
};

}  // namespace asteria
