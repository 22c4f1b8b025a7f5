#pragma once
// config.json of transformers' OlmoConfig / Olmo2Config, both ways.
//
// Written (export): architectures, model_type, hidden_size (d_model), intermediate_size
// (mlp_hidden), num_hidden_layers, num_attention_heads, num_key_value_heads (= heads: no GQA),
// hidden_act "silu", vocab_size (embedding_size: the rows the tensors have, all of which the
// softmax covers, as in Asteria), max_position_embeddings (seq_len), rope_theta, rope_scaling
// null, attention_bias false, attention_dropout 0, tie_word_embeddings, initializer_range,
// use_cache, torch_dtype, bos/eos/pad_token_id (null where there is none); olmo: clip_qkv null
// (OLMo-1's LayerNorm eps is fixed at 1e-5, it has no eps field); olmo2: rms_norm_eps.
// rope_theta is the field transformers 4.x reads; 5.x moves it into rope_parameters itself.
//
// Read (import, model.init_from): every key that changes the function is honoured or refused by
// name: model_type (olmo / olmo2; anything else is another architecture), architectures, hidden_size,
// num_hidden_layers, num_attention_heads, num_key_value_heads (must equal the heads), head_dim
// (must be hidden_size / heads), intermediate_size, vocab_size, rope_theta (or
// rope_parameters.rope_theta), rope_scaling / rope_parameters (only the default RoPE),
// hidden_act (silu), attention_bias (false), mlp_bias (false), attention_dropout (0), clip_qkv
// (null), tie_word_embeddings, rms_norm_eps (olmo2), max_position_embeddings (seq_len's default
// only: the context a run trains at is its own choice). Keys that do not change the function
// (transformers_version, torch_dtype, use_cache, initializer_range, token ids, ...) are read
// for the token ids only. Missing optional keys take transformers' defaults.
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "hf/hf_family.hpp"
#include "hf/safetensors.hpp"
#include "model/model_config.hpp"

namespace asteria::hf {

struct TokenIds {
  std::optional<int64_t> bos, eos, pad;
};

nlohmann::ordered_json config_json(const ModelConfig& cfg, HfFamily family, WeightDtype dtype, const TokenIds& ids);

// What a folder's config.json says of the model.
struct HfModelConfig {
  std::string path;          // the config.json read
  HfFamily family = HfFamily::Olmo;
  // ModelConfig's defaults with every field config.json determines set, seq_len from
  // max_position_embeddings, and vocab_size = embedding_size (config.json has no tokenizer
  // vocabulary: the rows are all it knows).
  ModelConfig model;
  // The model keys config.json determines, each with the config.json key it comes from, e.g.
  // {"d_model", "hidden_size"}: a run's config that sets one of them must agree.
  std::vector<std::pair<std::string, std::string>> determines;
  TokenIds ids;
};

// Reads FOLDER/config.json. Throws asteria::Error naming the file and the key: a missing file, a
// key of the wrong type, another architecture, a setting Asteria does not compute.
HfModelConfig read_config(const std::string& folder);

}  // namespace asteria::hf
