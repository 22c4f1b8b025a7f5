#include "optim/adamw.hpp"

#include <cmath>

namespace asteria {

std::vector<StateSpec> adamw_state_specs(int layer, const ParamTable& table, const AdamW::EntryFilter& owns) {
  size_t n = 0;
  for (const ParamEntry& e : table.entries)
    if (!owns || owns(e)) n += e.numel;
  if (n == 0) return {};
  const std::string base = "layer " + std::to_string(layer) + " / adamw ";
  return {{base + "m", n, StateClass::Hot, {}}, {base + "v", n, StateClass::Hot, {}}};
}

AdamW::AdamW(const AdamWParams& p, const std::vector<ParamTable>& layers, EntryFilter owns, bool own_memory)
    : p_(p), comp_(p.compensated, layers, own_memory) {
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
      owned.push_back({e.offset, n, e.numel, decay, e.name, e.shape, e.row_offset, e.tensor_rows});
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
  for (int l = 0; l < static_cast<int>(layers.size()); ++l) {
    if (m_[l].size() > 0) own_memory_[l].bind({&m_[l], &v_[l]});
  }
}

size_t AdamW::state_bytes() const {
  size_t n = 0;
  for (auto& b : m_) n += 2 * b.size() * sizeof(float);
  return n + comp_.state_bytes();
}

std::vector<StateTensor*> AdamW::layer_states(int layer) {
  std::vector<StateTensor*> out = comp_.layer_states(layer);
  if (m_[layer].size() == 0) return out;
  out.push_back(&m_[layer]);
  out.push_back(&v_[layer]);
  return out;
}

std::vector<std::vector<StatePiece>> AdamW::state_pieces(int layer) const {
  std::vector<std::vector<StatePiece>> out = comp_.state_pieces(layer);
  if (m_[layer].size() == 0) return out;
  for (const char* moment : {"m", "v"}) {
    out.emplace_back();
    for (const OwnedEntry& e : owned_[layer])
      out.back().push_back({state_piece_name("optim/adamw", e.name, moment), e.shape, e.state_offset, {}, e.row_offset,
                            e.tensor_rows});
  }
  return out;
}

void AdamW::step_layer(int layer, float* params, const float* grads, float grad_scale, double lr,
                       int64_t step) {
  update(layer, params, comp_.layer(layer), grads, grad_scale, lr, step);
}

void AdamW::update(int layer, float* params, float* comp, const float* grads, float grad_scale, double lr,
                   int64_t step) {
  lr *= p_.lr_scale;
  // Coefficients in double, rounded once: 1.0f - b2 in fp32 is 1.3e-5 off at beta2 = 0.999.
  const float b1 = static_cast<float>(p_.beta1), b2 = static_cast<float>(p_.beta2);
  const float a1 = static_cast<float>(1.0 - p_.beta1), a2 = static_cast<float>(1.0 - p_.beta2);
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
    float* c = comp ? comp + e.param_offset : nullptr;
    const size_t n = e.numel;
    auto moments = [&](size_t i) {
      const float gi = g[i] * grad_scale;
      const float mi = b1 * m[i] + a1 * gi;
      const float vi = b2 * v[i] + a2 * gi * gi;
      m[i] = mi;
      v[i] = vi;
      return -(step_size * mi / (std::sqrt(vi) * inv_sqrt_bc2 + eps) + wd * w[i]);
    };
    if (c) {
#pragma omp parallel for simd schedule(static) if (n > 4096)
      for (size_t i = 0; i < n; ++i) compensated_add(w[i], c[i], moments(i));
    } else {
#pragma omp parallel for simd schedule(static) if (n > 4096)
      for (size_t i = 0; i < n; ++i) w[i] += moments(i);
    }
  }
}

}  // namespace asteria
