#include "optim/adamw.hpp"

#include <cmath>

namespace asteria {

std::vector<StateSpec> adamw_state_specs(int layer, const ParamTable& table, const AdamW::EntryFilter& owns) {
  size_t n = 0;
  for (const ParamEntry& e : table.entries)
    if (!owns || owns(e)) n += e.numel;
  if (n == 0) return {};
  const std::string base = "layer " + std::to_string(layer) + " / adamw ";
  return {{base + "m", n, StateClass::Hot}, {base + "v", n, StateClass::Hot}};
}

AdamW::AdamW(const AdamWParams& p, const std::vector<ParamTable>& layers, EntryFilter owns, bool own_memory)
    : p_(p) {
  m_.reserve(layers.size());
  v_.reserve(layers.size());
  for (int l = 0; l < static_cast<int>(layers.size()); ++l) {
    const ParamTable& t = layers[l];
    std::vector<OwnedEntry> owned;
    size_t n = 0;
    for (const ParamEntry& e : t.entries) {
      if (owns && !owns(e)) continue;
      const bool decay = e.cls == ParamClass::Matrix ||
                         (e.cls == ParamClass::Embedding && p_.decay_embeddings) ||
                         (e.cls == ParamClass::Norm && p_.decay_norms);
      owned.push_back({e.offset, n, e.numel, decay});
      n += e.numel;
    }
    owned_.push_back(std::move(owned));
    std::vector<StateSpec> specs = adamw_state_specs(l, t, owns);
    if (specs.empty()) specs.assign(2, StateSpec{});   // owns nothing here: empty tensors, not listed
    m_.emplace_back(specs[0]);
    v_.emplace_back(specs[1]);
  }
  if (!own_memory) return;
  own_memory_.resize(layers.size());
  for (int l = 0; l < static_cast<int>(layers.size()); ++l) own_memory_[l].bind(layer_states(l));
}

size_t AdamW::state_bytes() const {
  size_t n = 0;
  for (auto& b : m_) n += 2 * b.size() * sizeof(float);
  return n;
}

std::vector<StateTensor*> AdamW::layer_states(int layer) {
  if (m_[layer].size() == 0) return {};
  return {&m_[layer], &v_[layer]};
}

void AdamW::step_layer(int layer, float* params, const float* grads, float grad_scale, double lr,
                       int64_t step) {
  lr *= p_.lr_scale;
  const float b1 = static_cast<float>(p_.beta1), b2 = static_cast<float>(p_.beta2);
  const double bc1 = 1.0 - std::pow(p_.beta1, static_cast<double>(step));
  const double bc2 = 1.0 - std::pow(p_.beta2, static_cast<double>(step));
  // Folded so the inner loop is: p -= step_size * m / (sqrt(v) * inv_sqrt_bc2 + eps) + decay * p.
  const float step_size = static_cast<float>(lr / bc1);
  const float inv_sqrt_bc2 = static_cast<float>(1.0 / std::sqrt(bc2));
  const float eps = static_cast<float>(p_.eps);
  for (const OwnedEntry& e : owned_[layer]) {
    const float wd = e.decay ? static_cast<float>(lr * p_.weight_decay) : 0.0f;
    float* m = m_[layer].data() + e.state_offset;
    float* v = v_[layer].data() + e.state_offset;
    float* w = params + e.param_offset;
    const float* g = grads + e.param_offset;
    const size_t n = e.numel;
#pragma omp parallel for simd schedule(static) if (n > 4096)
    for (size_t i = 0; i < n; ++i) {
      float gi = g[i] * grad_scale;
      float mi = b1 * m[i] + (1.0f - b1) * gi;
      float vi = b2 * v[i] + (1.0f - b2) * gi * gi;
      m[i] = mi;
      v[i] = vi;
      w[i] -= step_size * mi / (std::sqrt(vi) * inv_sqrt_bc2 + eps) + wd * w[i];
    }
  }
}

}  // namespace asteria
