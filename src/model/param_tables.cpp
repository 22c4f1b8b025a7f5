// The parameter tables of every layer (model.hpp: model_param_tables). The names and the order
// of tensors inside a layer's flat buffer are part of the checkpoint format: do not reorder.
#include <string>
#include <vector>

#include "model/model.hpp"

namespace asteria {

std::vector<ParamTable> model_param_tables(const ModelConfig& cfg) {
  const int64_t C = cfg.d_model, F = cfg.mlp_hidden, E = cfg.embedding_size;
  const bool rms = cfg.norm == NormKind::RMSNorm;
  std::vector<ParamTable> tables;
  tables.reserve(cfg.n_layers + 2);

  ParamTable embed;
  embed.add("wte", {E, C}, ParamClass::Embedding);
  tables.push_back(std::move(embed));

  for (int i = 0; i < cfg.n_layers; i++) {
    const std::string p = "blocks." + std::to_string(i) + ".";
    ParamTable t;
    if (rms) t.add(p + "att_norm", {C}, ParamClass::Norm);
    t.add(p + "att_qkv", {3 * C, C}, ParamClass::Matrix, /*parts=*/3);   // q, k, v
    if (cfg.qk_norm) {
      t.add(p + "q_norm", {C}, ParamClass::Norm);
      t.add(p + "k_norm", {C}, ParamClass::Norm);
    }
    t.add(p + "att_out", {C, C}, ParamClass::Matrix);
    if (rms) t.add(p + "mlp_norm", {C}, ParamClass::Norm);
    t.add(p + "mlp_up", {2 * F, C}, ParamClass::Matrix, /*parts=*/2);   // up (x), gate (g)
    t.add(p + "mlp_down", {C, F}, ParamClass::Matrix);
    tables.push_back(std::move(t));
  }

  ParamTable head;  // empty for a tied head with LayerNorm
  if (rms) head.add("norm_f", {C}, ParamClass::Norm);
  if (!cfg.tied_embeddings) head.add("lm_head", {E, C}, ParamClass::Embedding);
  tables.push_back(std::move(head));
  return tables;
}

bool layer_has_gemm_weights(const ModelConfig& cfg, int l) {
  const int L = cfg.n_layers;
  return (l >= 1 && l <= L) || l == (cfg.tied_embeddings ? 0 : L + 1);
}

size_t model_bf16_weight_copy_bytes(const ModelConfig& cfg) {
  const std::vector<ParamTable> tables = model_param_tables(cfg);
  size_t n = 0;
  for (int l = 0; l < static_cast<int>(tables.size()); ++l)
    if (layer_has_gemm_weights(cfg, l)) n += tables[l].numel;
  return n * sizeof(uint16_t);
}

std::vector<std::string> model_layer_names(const ModelConfig& cfg) {
  std::vector<std::string> names{"embed"};
  for (int i = 0; i < cfg.n_layers; i++) names.push_back("blocks." + std::to_string(i));
  names.push_back("head");
  return names;
}

std::vector<bool> model_recomputed_layers(const ModelConfig& cfg,
                                          const ActivationRecompute& recompute) {
  std::vector<bool> recomputed(cfg.n_layers + 2, false);
  for (int i = 0; i < cfg.n_layers; i++) recomputed[i + 1] = recompute.recomputes(i);
  return recomputed;
}

}  // namespace asteria
