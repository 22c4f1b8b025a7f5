#include "hf_config.hpp"

namespace asteria::export_cli {

nlohmann::ordered_json hf_config_json(const ModelConfig& cfg, HfFamily family, ExportDtype dtype,
                                      const std::optional<TokenizerInfo>& tok) {
  // A sentencepiece id of -1 means "none": null, never HF's defaults (pad 1, eos 50279).
  auto id = [&](int TokenizerInfo::*field) -> nlohmann::ordered_json {
    if (!tok || (*tok).*field < 0) return nullptr;
    return (*tok).*field;
  };
  nlohmann::ordered_json j;
  j["architectures"] = {hf_architecture(family)};
  j["model_type"] = hf_model_type(family);
  j["hidden_size"] = cfg.d_model;
  j["intermediate_size"] = cfg.mlp_hidden;
  j["num_hidden_layers"] = cfg.n_layers;
  j["num_attention_heads"] = cfg.n_heads;
  j["num_key_value_heads"] = cfg.n_heads;
  j["hidden_act"] = "silu";
  j["vocab_size"] = cfg.embedding_size;
  j["max_position_embeddings"] = cfg.seq_len;
  j["rope_theta"] = cfg.rope_theta;
  j["rope_scaling"] = nullptr;
  if (family == HfFamily::Olmo2) j["rms_norm_eps"] = cfg.norm_eps;
  if (family == HfFamily::Olmo) j["clip_qkv"] = nullptr;
  j["attention_bias"] = false;
  j["attention_dropout"] = 0.0;
  j["tie_word_embeddings"] = cfg.tied_embeddings;
  j["initializer_range"] = cfg.init_std;
  j["use_cache"] = true;
  j["bos_token_id"] = id(&TokenizerInfo::bos_id);
  j["eos_token_id"] = id(&TokenizerInfo::eos_id);
  j["pad_token_id"] = id(&TokenizerInfo::pad_id);
  j["torch_dtype"] = torch_dtype_name(dtype);
  return j;
}

}  // namespace asteria::export_cli
