#pragma once
// AdamW (Loshchilov & Hutter): Adam moments with bias correction and decoupled weight decay
//   m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2
//   p -= lr * ( m / (1-b1^t) / (sqrt(v / (1-b2^t)) + eps) + wd * p )
// (the decay is the decrement lr * wd * p, never a factor 1 - lr * wd rounded to fp32; with
// `compensated` the update is a compensated sum, update_compensation.hpp).
// Weight decay applies per tensor class: matrices always, embeddings and norm weights only
// when configured (OLMo's decay_embeddings / decay_norm_and_bias).
// An entry filter selects which tensors this AdamW owns (the second-order optimizers give it
// their 1-D parameters); state is allocated only for those.
#include <functional>
#include <vector>

#include "core/buffer.hpp"
#include "optim/adamw_update.hpp"
#include "optim/optimizer.hpp"
#include "optim/update_compensation.hpp"

namespace asteria {

struct AdamWParams {
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double weight_decay = 0.0;
  bool decay_embeddings = true;
  bool decay_norms = false;
  double lr_scale = 1.0;   // this AdamW's lr = the schedule's lr x lr_scale
  bool compensated = true; // Kahan-compensated updates (its own compensation state)
};

class AdamW final : public Optimizer {
 public:
  using EntryFilter = std::function<bool(const ParamEntry&)>;
  AdamW(const AdamWParams& p, const std::vector<ParamTable>& layers, EntryFilter owns = nullptr,
        bool own_memory = true);
  void step_layer(int layer, float* params, const float* grads, float grad_scale, double lr,
                  int64_t step) override;
  size_t state_bytes() const override;
  // The compensation first (when this AdamW keeps one), then m and v.
  std::vector<StateTensor*> layer_states(int layer) override;
  std::vector<std::vector<StatePiece>> state_pieces(int layer) const override;
  // step_layer with the compensation `comp` (nullptr: none), for an optimizer that owns the
  // compensation of the whole layer and gives this AdamW its 1-D part.
  void update(int layer, float* params, UpdateCompensation* comp, const float* grads, float grad_scale, double lr,
              int64_t step);
  // update() with `update_op`, an adamw_update of this AdamW's state memory (a device's when a
  // device backend bound it).
  template <class Update>
  void update_with(int layer, float* params, UpdateCompensation* comp, const float* grads, float grad_scale,
                   double lr, int64_t step, Update&& update_op) {
    const StateCopies here{comp, m_[layer].size() ? m_[layer].data() : nullptr,
                           v_[layer].size() ? v_[layer].data() : nullptr};
    step_copies(layer, here, params, grads, grad_scale, lr, step, update_op);
  }

  // step_layer with `update_op`, an adamw_update of the memory this AdamW's state tensors are
  // bound to (cuda::adamw_update when the tier manager bound them to device memory): the same
  // ranges and coefficients as step_layer.
  template <class Update>
  void step_layer_with(int layer, float* params, const float* grads, float grad_scale, double lr, int64_t step,
                       Update&& update_op) {
    update_with(layer, params, comp_.enabled() ? &comp_ : nullptr, grads, grad_scale, lr, step, update_op);
  }

 private:
  // Where a layer's compensation (null when none), m and v are.
  struct StateCopies {
    UpdateCompensation* comp = nullptr;
    float* m = nullptr;
    float* v = nullptr;
  };
  template <class Update>
  void step_copies(int layer, const StateCopies& s, float* params, const float* grads, float grad_scale, double lr,
                   int64_t step, Update&& update) const {
    lr *= p_.lr_scale;
    const AdamWCoefficients decayed = adamw_coefficients(p_.beta1, p_.beta2, p_.eps, lr, p_.weight_decay, step);
    AdamWCoefficients undecayed = decayed;
    undecayed.wd = 0;
    for (const OwnedEntry& e : owned_[layer])
      update(params + e.param_offset, s.comp ? s.comp->at(layer, e.param_offset) : nullptr, s.m + e.state_offset,
             s.v + e.state_offset, grads + e.param_offset, grad_scale, e.numel, e.decay ? decayed : undecayed);
  }

  struct OwnedEntry {
    size_t param_offset;   // in the layer's flat buffer
    size_t state_offset;   // in this optimizer's per-layer moment buffers
    size_t numel;
    bool decay;
    std::string name;      // the parameter tensor's
    std::vector<int64_t> shape;
    int64_t row_offset = 0, tensor_rows = 0;   // a shard's row-block (param_table.hpp)
  };
  AdamWParams p_;
  std::vector<std::vector<OwnedEntry>> owned_;   // per layer
  std::vector<StateTensor> m_, v_;   // per layer; never resized after construction
  std::vector<OwnedStateMemory> own_memory_;
  UpdateCompensation comp_;
};

// The moments AdamW keeps for layer l (m, v over the owned entries; none when it owns no entry
// of the layer); a top-level AdamW lists its compensation before them.
std::vector<StateSpec> adamw_state_specs(int layer, const ParamTable& table, const AdamW::EntryFilter& owns);

}  // namespace asteria
