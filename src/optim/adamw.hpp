#pragma once
// AdamW (Loshchilov & Hutter): Adam moments with bias correction and decoupled weight decay
//   m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2
//   p -= lr * ( m / (1-b1^t) / (sqrt(v / (1-b2^t)) + eps) + wd * p )
// Weight decay applies per tensor class: matrices always, embeddings and norm weights only
// when configured (OLMo's decay_embeddings / decay_norm_and_bias).
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
};

class AdamW final : public Optimizer {
 public:
  AdamW(const AdamWParams& p, const std::vector<ParamTable>& layers);
  void step_layer(int layer, float* params, const float* grads, float grad_scale, double lr,
                  int64_t step) override;
  size_t state_bytes() const override;

  const float* first_moment(int layer) const { return m_[layer].data(); }
  const float* second_moment(int layer) const { return v_[layer].data(); }

 private:
  AdamWParams p_;
  std::vector<ParamTable> tables_;
  std::vector<Buffer<float>> m_, v_;
};

}  // namespace asteria
