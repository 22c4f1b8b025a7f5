#pragma once
// Hand-made Hugging Face folders for the hf/ tests: safetensors files with any header, and
// config.json files, written byte for byte here (not by the code under test).
#include <cstdint>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "model/model_config.hpp"

namespace asteria::testing {

// A safetensors file: the 8-byte length, the header text as given (padded with spaces to 8), the
// data bytes.
inline void write_raw_safetensors(const std::string& path, const std::string& header, const std::string& data) {
  std::string text = header;
  text.append((8 - text.size() % 8) % 8, ' ');
  const uint64_t n = text.size();
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(&n), 8);
  out << text << data;
}

struct RawTensor {
  std::string name, dtype;
  std::vector<int64_t> shape;
  std::string bytes;
};

// A well-formed file of these tensors, data back to back in the given order.
inline void write_tensors(const std::string& path, const std::vector<RawTensor>& tensors) {
  nlohmann::ordered_json h;
  h["__metadata__"] = {{"format", "pt"}};
  std::string data;
  for (const RawTensor& t : tensors) {
    h[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {data.size(), data.size() + t.bytes.size()}}};
    data += t.bytes;
  }
  write_raw_safetensors(path, h.dump(), data);
}

inline std::string f32_bytes(const std::vector<float>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * 4);
}

// config.json of an OLMo (or OLMo-2) model of this shape.
inline nlohmann::json olmo_config_json(const ModelConfig& m, bool olmo2) {
  nlohmann::json j = {{"architectures", {olmo2 ? "Olmo2ForCausalLM" : "OlmoForCausalLM"}},
                      {"model_type", olmo2 ? "olmo2" : "olmo"},
                      {"hidden_size", m.d_model},
                      {"intermediate_size", m.mlp_hidden},
                      {"num_hidden_layers", m.n_layers},
                      {"num_attention_heads", m.n_heads},
                      {"num_key_value_heads", m.n_heads},
                      {"hidden_act", "silu"},
                      {"vocab_size", m.embedding_size},
                      {"max_position_embeddings", m.seq_len},
                      {"rope_theta", m.rope_theta},
                      {"rope_scaling", nullptr},
                      {"attention_bias", false},
                      {"attention_dropout", 0.0},
                      {"tie_word_embeddings", m.tied_embeddings},
                      {"eos_token_id", 7},
                      {"pad_token_id", 1},
                      {"torch_dtype", "float32"},
                      {"transformers_version", "4.46.0"}};
  if (olmo2) j["rms_norm_eps"] = m.norm_eps;
  else j["clip_qkv"] = nullptr;
  return j;
}

inline void write_json(const std::string& path, const nlohmann::json& j) {
  std::ofstream(path) << j.dump(2);
}

}  // namespace asteria::testing
