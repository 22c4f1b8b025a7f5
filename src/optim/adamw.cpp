#include "optim/adamw.hpp"

#include <cmath>

namespace asteria {

AdamW::AdamW(const AdamWParams& p, const std::vector<ParamTable>& layers) : p_(p), tables_(layers) {
  for (const auto& t : layers) {
    m_.emplace_back(t.numel);
    v_.emplace_back(t.numel);
  }
}

size_t AdamW::state_bytes() const {
  size_t n = 0;
  for (auto& b : m_) n += 2 * b.size() * sizeof(float);
  return n;
}

void AdamW::step_layer(int layer, float* params, const float* grads, float grad_scale, double lr,
                       int64_t step) {
  const float b1 = static_cast<float>(p_.beta1), b2 = static_cast<float>(p_.beta2);
  const double bc1 = 1.0 - std::pow(p_.beta1, static_cast<double>(step));
  const double bc2 = 1.0 - std::pow(p_.beta2, static_cast<double>(step));
  // Folded so the inner loop is: p -= step_size * m / (sqrt(v) * inv_sqrt_bc2 + eps) + decay * p.
  const float step_size = static_cast<float>(lr / bc1);
  const float inv_sqrt_bc2 = static_cast<float>(1.0 / std::sqrt(bc2));
  const float eps = static_cast<float>(p_.eps);
  float* m = m_[layer].data();
  float* v = v_[layer].data();
  for (const ParamEntry& e : tables_[layer].entries) {
    bool decay = e.cls == ParamClass::Matrix || (e.cls == ParamClass::Embedding && p_.decay_embeddings) ||
                 (e.cls == ParamClass::Norm && p_.decay_norms);
    const float wd = decay ? static_cast<float>(lr * p_.weight_decay) : 0.0f;
    const size_t begin = e.offset, end = e.offset + e.numel;
#pragma omp parallel for simd schedule(static)
    for (size_t i = begin; i < end; ++i) {
      float g = grads[i] * grad_scale;
      float mi = b1 * m[i] + (1.0f - b1) * g;
      float vi = b2 * v[i] + (1.0f - b2) * g * g;
      m[i] = mi;
      v[i] = vi;
      params[i] -= step_size * mi / (std::sqrt(vi) * inv_sqrt_bc2 + eps) + wd * params[i];
    }
  }
}

}  // namespace asteria
