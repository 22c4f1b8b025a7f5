#pragma once
// A tiny configuration and helpers shared by the whole-model tests.
#include <cstdint>
#include <vector>

#include "grad_check.hpp"
#include "model/model.hpp"
#include "model/param_source.hpp"

namespace asteria::testing {

// Small enough for finite differences over every tensor; the vocabulary is padded (30 -> 32)
// so that the padded embedding rows are exercised too.
inline ModelConfig tiny_config() {
  ModelConfig c;
  c.d_model = 16;
  c.n_layers = 2;
  c.n_heads = 2;
  c.mlp_hidden = 24;
  c.vocab_size = 30;
  c.embedding_size = 32;
  c.seq_len = 8;
  c.init = InitKind::Normal;
  c.init_std = 0.2;  // large enough that attention is far from uniform
  return c;
}

struct TokenBatch {
  std::vector<int32_t> inputs, targets;
};

inline TokenBatch random_batch(const ModelConfig& cfg, int batch, uint64_t seed) {
  TestRng rng(seed);
  TokenBatch b;
  const size_t n = static_cast<size_t>(batch) * cfg.seq_len;
  for (size_t i = 0; i < n; i++) {
    b.inputs.push_back(static_cast<int32_t>((rng.uniform() + 1) / 2 * cfg.vocab_size));
    b.targets.push_back(static_cast<int32_t>((rng.uniform() + 1) / 2 * cfg.vocab_size));
  }
  return b;
}

// Norm weights away from 1 so that their gradients matter in the checks.
template <class T>
void perturb_norm_weights(Model<T>& m, uint64_t seed) {
  TestRng rng(seed);
  for (int l = 0; l < m.num_layers(); l++)
    for (const auto& e : m.table(l).entries)
      if (e.cls == ParamClass::Norm)
        for (size_t i = 0; i < e.numel; i++) m.params(l)[e.offset + i] = T(1 + 0.3 * rng.uniform());
}

// Any Model<T, Ops>.
template <class M>
double forward_all(M& m) {
  double loss = 0;
  for (int l = 0; l < m.num_layers(); l++) loss = m.forward(l);
  return loss;
}

template <class M>
void backward_all(M& m, double grad_scale) {
  for (int l = m.num_layers() - 1; l >= 0; l--) {
    if (m.recomputes(l)) m.recompute(l);  // as the plan's recompute op does
    m.backward(l, grad_scale);
  }
}

// A float model's parameters as a ParamSource (what a Decoder loads).
class ModelParams : public ParamSource {
 public:
  explicit ModelParams(Model<float>& m) : m_(m) {}
  void fill(int layer, size_t begin, size_t count, float* dst) const override {
    const float* p = m_.params(layer);
    std::copy(p + begin, p + begin + count, dst);
  }
  std::string describe() const override { return "a test model"; }

 private:
  Model<float>& m_;
};

// The logits [E] of the last position of `tokens` by the training forward over the whole
// sequence (a Model whose seq_len is the sequence's length, batch 1), the model's parameters
// copied from `from`: xf of that row times every row of the LM head.
inline std::vector<double> full_forward_last_logits(Model<float>& from, const std::vector<int32_t>& tokens) {
  ModelConfig cfg = from.config();
  cfg.seq_len = static_cast<int>(tokens.size());
  Model<float> m(cfg, 1);
  for (int l = 0; l < m.num_layers(); l++) std::copy(from.params(l), from.params(l) + m.table(l).numel, m.params(l));
  m.set_batch(tokens.data(), tokens.data());
  forward_all(m);
  const float* xf = m.last_final_hidden() + (tokens.size() - 1) * cfg.d_model;
  const float* w = cfg.tied_embeddings ? m.params(0)
                                       : m.params(m.num_layers() - 1) + m.table(m.num_layers() - 1).find("lm_head")->offset;
  std::vector<double> logits(cfg.embedding_size);
  for (int v = 0; v < cfg.embedding_size; v++) {
    double s = 0;
    for (int c = 0; c < cfg.d_model; c++) s += double(xf[c]) * double(w[static_cast<size_t>(v) * cfg.d_model + c]);
    logits[v] = s;
  }
  return logits;
}

}  // namespace asteria::testing
