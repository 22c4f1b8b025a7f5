#pragma once
// Compensated parameter updates (Kahan summation), so that no update is lost to fp32 rounding.
//
// An fp32 weight w cannot take a change smaller than half its ulp (2^-25 |w| at best): at the
// tail of a cosine schedule lr * wd * w falls below that (lr * wd < 3e-8) and decoupled weight
// decay stops, and updates a few ulps long are rounded by up to tens of percent every step, in
// the same direction while the gradient is steady. With compensation each parameter carries one
// more fp32, c, holding the part of the updates that w could not take (w + c is the parameter to
// about 48 bits); the next update adds it back. w stays the fp32 value nearest that sum, so the
// model reads w unchanged, and every update, however small, reaches it once it adds up to half
// an ulp.
//
// `optim.compensated_updates` (default true) turns it on for every optimizer: one fp32 state per
// parameter ("layer L / update compensation", hot), listed first in the layer's states.
#include <cstddef>
#include <vector>

#include "model/param_table.hpp"
#include "optim/optimizer.hpp"
#include "optim/state_tensor.hpp"

namespace asteria {

// w += delta, carrying the rounding error of the sum in c.
inline void compensated_add(float& w, float& c, float delta) {
  const float y = delta - c;
  const float t = w + y;
  c = (t - w) - y;
  w = t;
}

// The compensation state of layer l (one float per parameter of the layer's flat buffer).
StateSpec compensation_state_spec(int layer, const ParamTable& table);

// The compensation tensors of every layer, or none when disabled.
class UpdateCompensation {
 public:
  UpdateCompensation(bool enabled, const std::vector<ParamTable>& layers, bool own_memory);
  bool enabled() const { return !states_.empty(); }
  // Layer l's compensation (nullptr when disabled); resident while the layer's step runs.
  float* layer(int l) { return enabled() && states_[l].size() > 0 ? states_[l].data() : nullptr; }
  // The layer's state tensors: the compensation, or none; and their checkpoint pieces (one per
  // parameter tensor, "optim/compensation/<tensor>").
  std::vector<StateTensor*> layer_states(int l);
  std::vector<std::vector<StatePiece>> state_pieces(int l) const;
  size_t state_bytes() const;

 private:
  std::vector<StateTensor> states_;   // per layer; never resized after construction
  std::vector<ParamTable> tables_;
  std::vector<OwnedStateMemory> own_memory_;
};

}  // namespace asteria
