#pragma once
// AdamW (Loshchilov & Hutter): Adam moments with bias correction and decoupled weight decay
//   m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2
//   p -= lr * ( m / (1-b1^t) / (sqrt(v / (1-b2^t)) + eps) + wd * p )
// Weight decay applies per tensor class: matrices always, embeddings and norm weights only
// when configured (OLMo's decay_embeddings / decay_norm_and_bias).
// An entry filter selects which tensors this AdamW owns (the second-order optimizers give it
// their 1-D parameters); state is allocated only for those.
#include <functional>
#include <vector>

#include "core/buffer.hpp"
#include "optim/optimizer.hpp"

namespace asteria {

struct AdamWParams {
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double weight_decay = 0.0;
  bool decay_embeddings = true;
  bool decay_norms = false;
  double lr_scale = 1.0;   // this AdamW's lr = the schedule's lr x lr_scale
};

class AdamW final : public Optimizer {
 public:
  using EntryFilter = std::function<bool(const ParamEntry&)>;
  AdamW(const AdamWParams& p, const std::vector<ParamTable>& layers, EntryFilter owns = nullptr,
        bool own_memory = true);
  void step_layer(int layer, float* params, const float* grads, float grad_scale, double lr,
                  int64_t step) override;
  size_t state_bytes() const override;
  std::vector<StateTensor*> layer_states(int layer) override;

 private:
  struct OwnedEntry {
    size_t param_offset;   // in the layer's flat buffer
    size_t state_offset;   // in this optimizer's per-layer moment buffers
    size_t numel;
    bool decay;
  };
  AdamWParams p_;
  std::vector<std::vector<OwnedEntry>> owned_;   // per layer
  std::vector<StateTensor> m_, v_;   // per layer; never resized after construction
  std::vector<OwnedStateMemory> own_memory_;
};

// The state tensors AdamW keeps for layer l (m, v over the owned entries; none when it owns no
// entry of the layer).
std::vector<StateSpec> adamw_state_specs(int layer, const ParamTable& table, const AdamW::EntryFilter& owns);

}  // namespace asteria
