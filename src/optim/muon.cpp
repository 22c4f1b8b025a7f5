#include "optim/muon.hpp"

#include <algorithm>
#include <cmath>

#include "core/error.hpp"
#include "optim/newton_schulz.hpp"

namespace asteria {

namespace {

// Each orthogonalized matrix of a table (fused tensors cut into their parts): rows, cols, offset.
template <class F>
void for_each_matrix(const ParamTable& t, F&& f) {
  for (const ParamEntry& e : t.entries) {
    if (!muon_orthogonalizes(e)) continue;
    const int64_t rows = e.shape[0] / e.parts, cols = e.shape[1];
    for (int k = 0; k < e.parts; ++k) f(e, e.offset + static_cast<size_t>(k * rows * cols), static_cast<int>(rows), static_cast<int>(cols));
  }
}

}  // namespace

bool muon_orthogonalizes(const ParamEntry& e) { return e.cls == ParamClass::Matrix && e.shape.size() == 2; }

std::vector<StateSpec> muon_state_specs(int layer, const ParamTable& table) {
  size_t n = 0;
  for (const ParamEntry& e : table.entries)
    if (muon_orthogonalizes(e)) n += e.numel;
  if (n == 0) return {};
  return {{"layer " + std::to_string(layer) + " / muon momentum", n, StateClass::Hot, {}, {}}};
}

double muon_step_flops(const std::vector<ParamTable>& layers, int ns_steps) {
  double flops = 0;
  for (const ParamTable& t : layers)
    for_each_matrix(t, [&](const ParamEntry&, size_t, int rows, int cols) { flops += newton_schulz_flops(rows, cols, ns_steps); });
  return flops;
}

size_t muon_work_floats(const std::vector<ParamTable>& layers) {
  size_t n = 0;
  for (const ParamTable& t : layers)
    for_each_matrix(t, [&](const ParamEntry&, size_t, int rows, int cols) {
      n = std::max(n, static_cast<size_t>(rows) * cols + newton_schulz_work(rows, cols));
    });
  return n;
}

Muon::Muon(const MuonParams& p, const std::vector<ParamTable>& layers, bool own_memory)
    : p_(p), comp_(p.compensated, layers, own_memory), work_(muon_work_floats(layers)) {
  AdamWParams aux = p.adamw;
  aux.compensated = false;   // it updates its part of the layer's compensation (comp_)
  adamw_ = std::make_unique<AdamW>(aux, layers, [](const ParamEntry& e) { return !muon_orthogonalizes(e); }, own_memory);
  momentum_.reserve(layers.size());
  for (int l = 0; l < static_cast<int>(layers.size()); ++l) {
    std::vector<Matrix> ms;
    std::vector<Entry> es;
    size_t n = 0;
    for (const ParamEntry& e : layers[l].entries) {
      if (!muon_orthogonalizes(e)) continue;
      ASTERIA_CHECK(e.tensor_rows == 0 || e.tensor_rows == e.shape[0], "optim.name muon: ", e.name, " holds rows ",
                    e.row_offset, "-", e.row_offset + e.shape[0], " of ", e.tensor_rows,
                    ": Muon orthogonalizes whole matrices (a rank must hold each whole)");
      es.push_back({e.name, e.shape, n});
      n += e.numel;
    }
    size_t at = 0;
    for_each_matrix(layers[l], [&](const ParamEntry&, size_t offset, int rows, int cols) {
      ms.push_back({offset, at, rows, cols});
      at += static_cast<size_t>(rows) * cols;
    });
    matrices_.push_back(std::move(ms));
    entries_.push_back(std::move(es));
    std::vector<StateSpec> specs = muon_state_specs(l, layers[l]);
    momentum_.emplace_back(specs.empty() ? StateSpec{} : specs[0]);
  }
  if (!own_memory) return;
  own_memory_.resize(layers.size());
  for (int l = 0; l < static_cast<int>(layers.size()); ++l)
    if (momentum_[l].size() > 0) own_memory_[l].bind({&momentum_[l]});
}

size_t Muon::state_bytes() const {
  size_t n = adamw_->state_bytes() + comp_.state_bytes();
  for (const StateTensor& m : momentum_) n += m.size() * sizeof(float);
  return n;
}

std::vector<StateTensor*> Muon::layer_states(int layer) {
  std::vector<StateTensor*> out = comp_.layer_states(layer);
  for (StateTensor* s : adamw_->layer_states(layer)) out.push_back(s);
  if (momentum_[layer].size() > 0) out.push_back(&momentum_[layer]);
  return out;
}

std::vector<std::vector<StatePiece>> Muon::state_pieces(int layer) const {
  std::vector<std::vector<StatePiece>> out = comp_.state_pieces(layer);
  for (auto& p : adamw_->state_pieces(layer)) out.push_back(std::move(p));
  if (momentum_[layer].size() == 0) return out;
  out.emplace_back();
  for (const Entry& e : entries_[layer])
    out.back().push_back({state_piece_name("optim/muon", e.name, "momentum"), e.shape, e.state_offset, {}, 0, 0});
  return out;
}

void Muon::step_layer(int layer, float* params, const float* grads, float grad_scale, double lr, int64_t step) {
  UpdateCompensation* comp = comp_.enabled() ? &comp_ : nullptr;
  adamw_->update(layer, params, comp, grads, grad_scale, lr, step);
  if (matrices_[layer].empty()) return;
  float* momentum = momentum_[layer].data();
  const float one_minus = static_cast<float>(1.0 - p_.momentum);
  const float step_lr = static_cast<float>(lr), decay = static_cast<float>(lr * p_.weight_decay);
  for (const Matrix& m : matrices_[layer]) {
    const size_t n = static_cast<size_t>(m.rows) * m.cols;
    float* u = work_.data();
    float* M = momentum + m.state_offset;
    const float* g = grads + m.param_offset;
    for (size_t i = 0; i < n; ++i) {
      const float gi = g[i] * grad_scale;
      M[i] += one_minus * (gi - M[i]);
      u[i] = p_.nesterov ? M[i] - one_minus * (M[i] - gi) : M[i];
    }
    newton_schulz5(u, m.rows, m.cols, p_.ns_steps, u + n);
    const float scale = static_cast<float>(std::sqrt(std::max(1.0, static_cast<double>(m.rows) / m.cols)));
    float* w = params + m.param_offset;
    float* c = comp ? comp->at(layer, m.param_offset) : nullptr;   // the layer's one band: contiguous
    for (size_t i = 0; i < n; ++i) {
      const float delta = -(step_lr * (scale * u[i]) + decay * w[i]);
      if (c) compensated_add(w[i], c[i], delta);
      else w[i] += delta;
    }
  }
}

}  // namespace asteria
