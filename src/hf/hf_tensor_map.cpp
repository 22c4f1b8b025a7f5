#include "hf/hf_tensor_map.hpp"

#include "core/error.hpp"
#include "model/model.hpp"

namespace asteria::hf {

std::vector<TensorSlot> tensor_map(const ModelConfig& cfg, HfFamily family) {
  const std::vector<ParamTable> tables = model_param_tables(cfg);
  const int64_t C = cfg.d_model, F = cfg.mlp_hidden;
  std::vector<TensorSlot> out;
  // Rows [row0, row0 + n) of Asteria tensor `entry` of layer l as HF tensor `name`.
  auto rows = [&](std::string name, int l, const std::string& entry, int64_t row0, int64_t n) {
    const ParamEntry* e = tables[l].find(entry);
    ASTERIA_ASSERT(e, "no tensor ", entry, " in layer ", l);
    const int64_t cols = e->shape.size() == 2 ? e->shape[1] : 1;
    TensorSlot s;
    s.name = std::move(name);
    s.shape = e->shape.size() == 2 ? std::vector<int64_t>{n, cols} : std::vector<int64_t>{n};
    s.layer = l;
    s.entry = entry;
    s.entry_begin = static_cast<size_t>(row0 * cols);
    s.layer_begin = e->offset + s.entry_begin;
    s.numel = static_cast<size_t>(n * cols);
    out.push_back(std::move(s));
  };
  auto whole = [&](std::string name, int l, const std::string& entry) {
    const ParamEntry* e = tables[l].find(entry);
    ASTERIA_ASSERT(e, "no tensor ", entry, " in layer ", l);
    rows(std::move(name), l, entry, 0, e->shape[0]);
  };

  whole("model.embed_tokens.weight", 0, "wte");
  for (int i = 0; i < cfg.n_layers; i++) {
    const int l = i + 1;
    const std::string a = "blocks." + std::to_string(i) + ".";
    const std::string h = "model.layers." + std::to_string(i) + ".";
    rows(h + "self_attn.q_proj.weight", l, a + "att_qkv", 0, C);
    rows(h + "self_attn.k_proj.weight", l, a + "att_qkv", C, C);
    rows(h + "self_attn.v_proj.weight", l, a + "att_qkv", 2 * C, C);
    whole(h + "self_attn.o_proj.weight", l, a + "att_out");
    if (family == HfFamily::Olmo2) {
      whole(h + "self_attn.q_norm.weight", l, a + "q_norm");
      whole(h + "self_attn.k_norm.weight", l, a + "k_norm");
      whole(h + "post_attention_layernorm.weight", l, a + "att_norm");
    }
    rows(h + "mlp.gate_proj.weight", l, a + "mlp_up", F, F);
    rows(h + "mlp.up_proj.weight", l, a + "mlp_up", 0, F);
    whole(h + "mlp.down_proj.weight", l, a + "mlp_down");
    if (family == HfFamily::Olmo2) whole(h + "post_feedforward_layernorm.weight", l, a + "mlp_norm");
  }
  const int head = cfg.n_layers + 1;
  if (family == HfFamily::Olmo2) whole("model.norm.weight", head, "norm_f");
  if (!cfg.tied_embeddings) whole("lm_head.weight", head, "lm_head");
  return out;
}

}  // namespace asteria::hf
