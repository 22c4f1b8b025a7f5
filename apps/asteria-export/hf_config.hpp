#pragma once
// config.json for transformers' OlmoConfig / Olmo2Config (field names of those classes).
//   architectures, model_type, hidden_size (d_model), intermediate_size (mlp_hidden),
//   num_hidden_layers, num_attention_heads, num_key_value_heads (= heads: no GQA),
//   hidden_act "silu", vocab_size (embedding_size: the padded rows the tensors have),
//   max_position_embeddings (seq_len), rope_theta, rope_scaling null, attention_bias false,
//   attention_dropout 0, tie_word_embeddings, initializer_range, use_cache, torch_dtype,
//   bos/eos/pad_token_id (from the tokenizer; null where it has none or there is no tokenizer);
//   olmo: clip_qkv null (OLMo-1's LayerNorm eps is fixed at 1e-5, it has no eps field);
//   olmo2: rms_norm_eps (norm_eps, used by every RMSNorm including QK-norm).
// rope_theta is the field transformers 4.x reads; 5.x moves it into rope_parameters itself.
#include <nlohmann/json.hpp>
#include <optional>

#include "hf_layout.hpp"
#include "safetensors_writer.hpp"
#include "tokenizer_export.hpp"

namespace asteria::export_cli {

nlohmann::ordered_json hf_config_json(const ModelConfig& cfg, HfFamily family, ExportDtype dtype,
                                      const std::optional<TokenizerInfo>& tok);

}  // namespace asteria::export_cli
