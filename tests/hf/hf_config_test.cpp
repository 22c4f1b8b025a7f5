// hf/hf_config.hpp: config.json of OLMo and OLMo-2 read into the model's config, and every key
// that would change the function refused by name, as a file of another architecture is.
#include "hf/hf_config.hpp"

#include <gtest/gtest.h>

#include "core/error.hpp"
#include "hf_test_files.hpp"
#include "test_util.hpp"

namespace asteria::hf {
namespace {

using testing::TempDir;

ModelConfig shape() {
  ModelConfig m;
  m.d_model = 64;
  m.n_layers = 3;
  m.n_heads = 4;
  m.mlp_hidden = 96;
  m.embedding_size = 128;
  m.seq_len = 32;
  m.rope_theta = 500000;
  m.norm_eps = 1e-6;
  m.tied_embeddings = true;
  return m;
}

void expect_refused(const nlohmann::json& j, const std::vector<std::string>& parts) {
  TempDir dir("hfcfg");
  testing::write_json(dir.file("config.json"), j);
  try {
    read_config(dir.path().string());
    FAIL() << "accepted " << j.dump();
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(dir.file("config.json")), std::string::npos) << msg;
    for (const std::string& p : parts) EXPECT_NE(msg.find(p), std::string::npos) << "'" << p << "' not in: " << msg;
  }
}

TEST(HfConfig, Olmo2IsReadIntoTheModelsFields) {
  TempDir dir("hfcfg");
  testing::write_json(dir.file("config.json"), testing::olmo_config_json(shape(), true));
  const HfModelConfig c = read_config(dir.path().string());
  EXPECT_EQ(c.family, HfFamily::Olmo2);
  EXPECT_EQ(c.model.d_model, 64);
  EXPECT_EQ(c.model.n_layers, 3);
  EXPECT_EQ(c.model.n_heads, 4);
  EXPECT_EQ(c.model.mlp_hidden, 96);
  EXPECT_EQ(c.model.embedding_size, 128);
  EXPECT_EQ(c.model.vocab_size, 128);
  EXPECT_EQ(c.model.seq_len, 32);
  EXPECT_EQ(c.model.rope_theta, 500000);
  EXPECT_EQ(c.model.norm_eps, 1e-6);
  EXPECT_TRUE(c.model.tied_embeddings);
  EXPECT_EQ(c.model.norm, NormKind::RMSNorm);
  EXPECT_EQ(c.model.norm_placement, NormPlacement::Post);
  EXPECT_TRUE(c.model.qk_norm);
  EXPECT_EQ(c.ids.eos, 7);
  EXPECT_EQ(c.ids.pad, 1);
  EXPECT_FALSE(c.ids.bos);
}

TEST(HfConfig, OlmoFixesLayerNormPreAndItsEps) {
  TempDir dir("hfcfg");
  nlohmann::json j = testing::olmo_config_json(shape(), false);
  j.erase("tie_word_embeddings");   // transformers' default: untied
  j.erase("rope_theta");            // 10000
  j["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 20000.0}};   // transformers 5.x spelling
  testing::write_json(dir.file("config.json"), j);
  const HfModelConfig c = read_config(dir.path().string());
  EXPECT_EQ(c.family, HfFamily::Olmo);
  EXPECT_EQ(c.model.norm, NormKind::LayerNorm);
  EXPECT_EQ(c.model.norm_placement, NormPlacement::Pre);
  EXPECT_FALSE(c.model.qk_norm);
  EXPECT_EQ(c.model.norm_eps, 1e-5);
  EXPECT_FALSE(c.model.tied_embeddings);
  EXPECT_EQ(c.model.rope_theta, 20000.0);
}

TEST(HfConfig, WhatAsteriaDoesNotComputeIsRefusedByName) {
  auto with = [](const char* key, const nlohmann::json& value, bool olmo2 = false) {
    nlohmann::json j = testing::olmo_config_json(shape(), olmo2);
    j[key] = value;
    return j;
  };
  expect_refused(with("clip_qkv", 8.0), {"'clip_qkv' = 8.0"});
  expect_refused(with("attention_bias", true), {"'attention_bias' = true", "biases"});
  expect_refused(with("mlp_bias", true, true), {"'mlp_bias'"});
  expect_refused(with("rope_scaling", {{"rope_type", "linear"}, {"factor", 2.0}}), {"'rope_scaling'", "default RoPE"});
  expect_refused(with("rope_scaling", {{"type", "dynamic"}, {"factor", 2.0}}), {"'rope_scaling'"});
  expect_refused(with("hidden_act", "gelu"), {"'hidden_act' = \"gelu\"", "SwiGLU"});
  expect_refused(with("num_key_value_heads", 2), {"'num_key_value_heads' = 2", "grouped-query"});
  expect_refused(with("head_dim", 32), {"'head_dim' = 32"});
  expect_refused(with("attention_dropout", 0.1), {"'attention_dropout'", "dropout"});
  expect_refused(with("model_type", "llama"), {"model_type 'llama'", "another architecture"});
  expect_refused(with("architectures", {"LlamaForCausalLM"}), {"do not name OlmoForCausalLM"});
  expect_refused(with("hidden_size", "64"), {"'hidden_size' must be a positive integer"});
  expect_refused(with("hidden_size", 66), {"not a multiple of num_attention_heads"});
  expect_refused(with("tie_word_embeddings", 1), {"'tie_word_embeddings' must be true or false"});
  expect_refused(with("rms_norm_eps", -1.0, true), {"'rms_norm_eps' must be > 0"});
  nlohmann::json j = testing::olmo_config_json(shape(), false);
  j.erase("intermediate_size");
  expect_refused(j, {"no 'intermediate_size'"});
}

TEST(HfConfig, AFolderWithoutConfigIsNamed) {
  TempDir dir("hfcfg");
  try {
    read_config(dir.path().string());
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no config.json"), std::string::npos) << e.what();
  }
  std::ofstream(dir.file("config.json")) << "{not json";
  try {
    read_config(dir.path().string());
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not valid JSON"), std::string::npos) << e.what();
  }
}

TEST(HfConfig, WrittenConfigReadsBackAsTheModel) {
  TempDir dir("hfcfg");
  for (bool olmo2 : {false, true}) {
    ModelConfig m = shape();
    apply_family(olmo2 ? HfFamily::Olmo2 : HfFamily::Olmo, m);
    m.vocab_size = 120;   // the tokenizer's ids; config.json holds the rows
    testing::write_json(dir.file("config.json"), config_json(m, family_for(m, "export"), WeightDtype::F32, {}));
    const HfModelConfig c = read_config(dir.path().string());
    EXPECT_EQ(c.model.d_model, m.d_model);
    EXPECT_EQ(c.model.embedding_size, m.embedding_size);
    EXPECT_EQ(c.model.vocab_size, m.embedding_size);
    EXPECT_EQ(c.model.norm_eps, m.norm_eps);
    EXPECT_EQ(c.model.rope_theta, m.rope_theta);
    EXPECT_EQ(c.model.tied_embeddings, m.tied_embeddings);
    EXPECT_EQ(c.model.qk_norm, olmo2);
    EXPECT_FALSE(c.ids.eos);   // null: none, not transformers' default
  }
}

}  // namespace
}  // namespace asteria::hf
