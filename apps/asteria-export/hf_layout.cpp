#include "hf_layout.hpp"

#include "core/error.hpp"

namespace asteria::export_cli {

namespace {

constexpr const char* kSupported =
    "supported: norm_placement=pre with norm=layernorm and qk_norm=false (OLMo-1, "
    "OlmoForCausalLM), or norm_placement=post with norm=rmsnorm and qk_norm=true (OLMo-2, "
    "Olmo2ForCausalLM)";

template <class... Args>
[[noreturn]] void refuse(const Args&... what) {
  fail("cannot export ", what..., "; ", kSupported);
}

}  // namespace

const char* hf_model_type(HfFamily f) { return f == HfFamily::Olmo ? "olmo" : "olmo2"; }
const char* hf_architecture(HfFamily f) {
  return f == HfFamily::Olmo ? "OlmoForCausalLM" : "Olmo2ForCausalLM";
}

HfFamily hf_family_for(const ModelConfig& cfg) {
  const bool pre = cfg.norm_placement == NormPlacement::Pre;
  const bool layernorm = cfg.norm == NormKind::LayerNorm;
  if (pre && !layernorm)
    refuse("norm_placement=pre with norm=rmsnorm: neither OLMo class of transformers has "
           "pre-norm RMSNorm");
  if (!pre && layernorm)
    refuse("norm_placement=post with norm=layernorm: transformers' OLMo-2 class uses RMSNorm "
           "after each sublayer");
  if (pre && cfg.qk_norm)
    refuse("qk_norm=true with norm_placement=pre: transformers' OLMo-1 class "
           "(OlmoForCausalLM) has no QK-norm");
  if (!pre && !cfg.qk_norm)
    refuse("qk_norm=false with norm_placement=post: transformers' OLMo-2 class "
           "(Olmo2ForCausalLM) always applies QK-norm");
  // OlmoLayerNorm hard-codes eps = 1e-5; another eps would silently change the function.
  if (pre && cfg.norm_eps != 1e-5)
    refuse("norm=layernorm with norm_eps=", cfg.norm_eps,
           ": transformers' OLMo-1 LayerNorm has a fixed eps of 1e-5");
  return pre ? HfFamily::Olmo : HfFamily::Olmo2;
}

size_t HfTensor::numel() const {
  size_t n = 1;
  for (auto s : shape) n *= static_cast<size_t>(s);
  return n;
}

std::vector<HfTensor> hf_tensors(const ModelConfig& cfg, HfFamily family,
                                 const std::map<std::string, CheckpointTensor>& params) {
  const int64_t C = cfg.d_model, F = cfg.mlp_hidden;
  std::vector<HfTensor> out;
  auto source = [&](const std::string& name) -> const CheckpointTensor& {
    const auto it = params.find(name);
    ASTERIA_ASSERT(it != params.end(), "checkpoint parameter ", name, " not read");
    return it->second;
  };
  // Rows [row0, row0 + rows) of a row-major Asteria tensor as one HF tensor.
  auto rows = [&](std::string hf_name, const std::string& name, int64_t row0, int64_t n) {
    const CheckpointTensor& t = source(name);
    const int64_t cols = t.shape.size() == 2 ? t.shape[1] : 1;
    std::vector<int64_t> shape = t.shape.size() == 2 ? std::vector<int64_t>{n, cols}
                                                     : std::vector<int64_t>{n};
    out.push_back({std::move(hf_name), std::move(shape), t.data.data() + row0 * cols});
  };
  auto whole = [&](std::string hf_name, const std::string& name) {
    rows(std::move(hf_name), name, 0, source(name).shape[0]);
  };

  whole("model.embed_tokens.weight", "wte");
  for (int i = 0; i < cfg.n_layers; i++) {
    const std::string a = "blocks." + std::to_string(i) + ".";
    const std::string h = "model.layers." + std::to_string(i) + ".";
    rows(h + "self_attn.q_proj.weight", a + "att_qkv", 0, C);
    rows(h + "self_attn.k_proj.weight", a + "att_qkv", C, C);
    rows(h + "self_attn.v_proj.weight", a + "att_qkv", 2 * C, C);
    whole(h + "self_attn.o_proj.weight", a + "att_out");
    if (family == HfFamily::Olmo2) {
      whole(h + "self_attn.q_norm.weight", a + "q_norm");
      whole(h + "self_attn.k_norm.weight", a + "k_norm");
      whole(h + "post_attention_layernorm.weight", a + "att_norm");
    }
    rows(h + "mlp.gate_proj.weight", a + "mlp_up", F, F);
    rows(h + "mlp.up_proj.weight", a + "mlp_up", 0, F);
    whole(h + "mlp.down_proj.weight", a + "mlp_down");
    if (family == HfFamily::Olmo2) whole(h + "post_feedforward_layernorm.weight", a + "mlp_norm");
  }
  if (family == HfFamily::Olmo2) whole("model.norm.weight", "norm_f");
  if (!cfg.tied_embeddings) whole("lm_head.weight", "lm_head");
  return out;
}

}  // namespace asteria::export_cli
