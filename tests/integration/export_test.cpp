// End to end: asteria-export on checkpoints written here, checked against an independent numpy
// forward pass of transformers' OLMo / OLMo-2 semantics (hf_numpy_forward.py), plus bf16,
// refusals, bad checkpoints and the tokenizer. Runs the built programs from ASTERIA_BIN_DIR.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "export_fixture.hpp"

using namespace asteria;
using namespace asteria::testing;

namespace {

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

std::string export_args(const TempDir& dir, const std::string& extra = "") {
  return "--checkpoint " + dir.file("ckpt") + " --out " + dir.file("hf") + extra;
}

// Exports the model of `sets` (fp32), runs the numpy forward on 3 sequences and compares its
// logits with Asteria's: the fp32 model to 1e-5 relative, and the same weights in a fp64 model
// (only rounding left) to 1e-10, which would expose any eps, RoPE or layout mismatch.
void expect_export_matches_numpy(const std::vector<std::string>& sets, const std::string& arch) {
  TempDir dir("export");
  const Config cfg = export_config(sets);
  const ModelConfig& mc = cfg.model;
  const int B = 3;
  Model<float> m(mc, B);
  init_model(m, 11);
  write_checkpoint(dir.file("ckpt"), cfg, m, 7);

  std::string log;
  ASSERT_EQ(run_command(export_command(export_args(dir)), &log), 0) << log;
  EXPECT_TRUE(contains(log, "exported step 7 as " + arch)) << log;
  EXPECT_TRUE(contains(log, "warning: no tokenizer")) << log;   // data.train is unset

  const nlohmann::json j = read_json(dir.file("hf/config.json"));
  EXPECT_EQ(j["architectures"], nlohmann::json::array({arch}));
  EXPECT_EQ(j["vocab_size"], 512);   // the padded embedding rows
  EXPECT_EQ(j["hidden_size"], 64);
  EXPECT_EQ(j["intermediate_size"], 256);
  EXPECT_EQ(j["num_attention_heads"], 4);
  EXPECT_EQ(j["num_key_value_heads"], 4);
  EXPECT_EQ(j["num_hidden_layers"], 2);
  EXPECT_EQ(j["max_position_embeddings"], 64);
  EXPECT_EQ(j["tie_word_embeddings"], mc.tied_embeddings);
  EXPECT_EQ(j["torch_dtype"], "float32");
  EXPECT_EQ(j["attention_bias"], false);
  EXPECT_TRUE(j["eos_token_id"].is_null() && j["pad_token_id"].is_null());
  EXPECT_EQ(j.contains("rms_norm_eps"), arch == "Olmo2ForCausalLM");

  const auto ids = random_tokens(mc, B, 3);
  write_tokens(dir.file("tokens.txt"), ids, mc.seq_len);
  ASSERT_EQ(run_command(numpy_forward_command(dir.file("hf"), dir.file("tokens.txt"),
                                              dir.file("logits.bin")), &log), 0) << log;
  const std::vector<double> hf = read_f64(dir.file("logits.bin"));
  ASSERT_EQ(hf.size(), ids.size() * mc.embedding_size);

  const double err32 =
      relative_logit_error(hf, asteria_logits(m, ids), ids.size(), mc.vocab_size, mc.embedding_size);
  Model<double> md(mc, B);
  for (int l = 0; l < m.num_layers(); l++)
    for (size_t i = 0; i < m.table(l).numel; i++) md.params(l)[i] = m.params(l)[i];
  const double err64 =
      relative_logit_error(hf, asteria_logits(md, ids), ids.size(), mc.vocab_size, mc.embedding_size);
  std::printf("%s: relative logit error fp32 model %.3g, fp64 model %.3g\n", arch.c_str(), err32,
              err64);
  EXPECT_LT(err32, 1e-5);
  EXPECT_LT(err64, 1e-10);
}

const std::vector<std::string> kPost = {"model.norm=rmsnorm", "model.norm_placement=post",
                                        "model.qk_norm=true", "model.norm_eps=1e-6",
                                        "model.rope_theta=500000"};

std::vector<std::string> with(std::vector<std::string> a, const std::string& extra) {
  a.push_back(extra);
  return a;
}

}  // namespace

TEST(Export, PreNormLayerNormTiedMatchesNumpyForward) {
  expect_export_matches_numpy({"model.tied_embeddings=true"}, "OlmoForCausalLM");
}

TEST(Export, PreNormLayerNormUntiedMatchesNumpyForward) {
  expect_export_matches_numpy({"model.tied_embeddings=false", "model.z_loss=1e-4"},
                              "OlmoForCausalLM");
}

TEST(Export, PostNormRmsQkNormTiedMatchesNumpyForward) {
  expect_export_matches_numpy(with(kPost, "model.tied_embeddings=true"), "Olmo2ForCausalLM");
}

TEST(Export, PostNormRmsQkNormUntiedMatchesNumpyForward) {
  expect_export_matches_numpy(with(kPost, "model.tied_embeddings=false"), "Olmo2ForCausalLM");
}
