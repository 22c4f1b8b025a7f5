// End to end: asteria-export on checkpoints written here, and Hugging Face's OlmoForCausalLM /
// Olmo2ForCausalLM forward pass and loss on the exported folder (hf_torch_reference.py, written
// after transformers' modeling_olmo.py / modeling_olmo2.py in Debian's PyTorch) against Asteria's:
// OLMo and OLMo-2, tied and untied, padded (vocab 500 in 512 rows) and unpadded. Every logit of
// every row HF's LM head has is compared, padding rows included, and the loss. Runs the built
// programs from ASTERIA_BIN_DIR.
#include <gtest/gtest.h>

#include <algorithm>
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

// Exports the model of `sets` (fp32), runs the reference on 3 sequences and compares with Asteria:
// the fp32 model's logits within 1e-5 of the largest (fp32 rounding) and its loss within 1e-5
// relative of transformers' float32 pass; the same weights in a fp64 model against the float64
// pass to 1e-10 (only rounding left, which would expose any eps, RoPE, layout or softmax-width
// mismatch). `name` labels the parity line (bench/hf_parity.sh collects them).
void expect_export_matches_hf(const std::string& name, const std::vector<std::string>& sets, const std::string& arch) {
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
  EXPECT_EQ(j["vocab_size"], 512);   // every row, the width Asteria's softmax runs over too
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
  ASSERT_EQ(run_command(hf_reference_command(dir.file("hf"), dir.file("tokens.txt"), dir.file("ref")), &log), 0) << log;
  const std::vector<double> hf32 = read_f64(dir.file("ref.f32")), hf64 = read_f64(dir.file("ref.f64"));
  const nlohmann::json losses = read_json(dir.file("ref.json"));
  const size_t N = static_cast<size_t>(B) * mc.seq_len;
  ASSERT_EQ(hf32.size(), N * mc.embedding_size);
  ASSERT_EQ(hf64.size(), N * mc.embedding_size);

  const ModelBatch batch = model_batch(ids, mc.seq_len);
  double loss32 = 0, loss64 = 0;
  const LogitDifference d32 = logit_difference(asteria_logits(m, batch, &loss32), hf32);
  Model<double> md(mc, B);
  for (int l = 0; l < m.num_layers(); l++)
    for (size_t i = 0; i < m.table(l).numel; i++) md.params(l)[i] = m.params(l)[i];
  const LogitDifference d64 = logit_difference(asteria_logits(md, batch, &loss64), hf64);
  const double hf_loss32 = losses["loss_f32"].get<double>(), hf_loss64 = losses["loss_f64"].get<double>();
  const double rel32 = std::abs(loss32 - hf_loss32) / hf_loss32, rel64 = std::abs(loss64 - hf_loss64) / hf_loss64;
  // The baseline of the same run: the loss of a softmax over the first vocab_size rows only (what
  // Asteria's head computed before 2026-12-06) against HF's, from the fp64 logits.
  double vocab_only = 0;
  for (size_t n = 0; n < N; n++) {
    const double* row = hf64.data() + n * mc.embedding_size;
    const double top = *std::max_element(row, row + mc.vocab_size);
    double sum = 0;
    for (int v = 0; v < mc.vocab_size; v++) sum += std::exp(row[v] - top);
    vocab_only += top + std::log(sum) - row[batch.targets[n]];
  }
  vocab_only /= static_cast<double>(N);
  std::printf("parity %s %s: loss asteria %.9g hf %.9g (relative %.3g); max |logit| difference %.3g of %.3g "
              "(relative %.3g); fp64: loss relative %.3g, logits relative %.3g; softmax over vocab_size rows only: "
              "loss relative %.3g\n",
              name.c_str(), arch.c_str(), loss32, hf_loss32, rel32, d32.max_abs, d32.scale, d32.relative(), rel64,
              d64.relative(), std::abs(vocab_only - hf_loss64) / hf_loss64);
  EXPECT_LT(d32.relative(), 1e-5);
  EXPECT_LT(rel32, 1e-5);
  EXPECT_LT(d64.relative(), 1e-10);
  EXPECT_LT(rel64, 1e-10);
}

const std::vector<std::string> kPost = {"model.norm=rmsnorm", "model.norm_placement=post",
                                        "model.qk_norm=true", "model.norm_eps=1e-6",
                                        "model.rope_theta=500000"};

std::vector<std::string> with(std::vector<std::string> a, const std::string& extra) {
  a.push_back(extra);
  return a;
}

}  // namespace

// Each case padded (vocab 500 in 512 rows: the padding rows take part in HF's softmax, and in
// Asteria's) and unpadded (512 in 512).
const std::vector<std::string> kUnpadded = {"model.vocab_size=512"};

TEST(Export, PreNormLayerNormTiedMatchesHf) {
  expect_export_matches_hf("olmo tied padded", {"model.tied_embeddings=true"}, "OlmoForCausalLM");
  expect_export_matches_hf("olmo tied unpadded", with(kUnpadded, "model.tied_embeddings=true"), "OlmoForCausalLM");
}

TEST(Export, PreNormLayerNormUntiedMatchesHf) {
  // With a z-loss (a training term, not part of the model's function).
  expect_export_matches_hf("olmo untied padded", {"model.tied_embeddings=false", "model.z_loss=1e-4"},
                           "OlmoForCausalLM");
  expect_export_matches_hf("olmo untied unpadded", with(kUnpadded, "model.tied_embeddings=false"), "OlmoForCausalLM");
}

TEST(Export, PostNormRmsQkNormTiedMatchesHf) {
  expect_export_matches_hf("olmo2 tied padded", with(kPost, "model.tied_embeddings=true"), "Olmo2ForCausalLM");
  expect_export_matches_hf("olmo2 tied unpadded", with(with(kPost, "model.tied_embeddings=true"), "model.vocab_size=512"),
                           "Olmo2ForCausalLM");
}

TEST(Export, PostNormRmsQkNormUntiedMatchesHf) {
  expect_export_matches_hf("olmo2 untied padded", with(kPost, "model.tied_embeddings=false"), "Olmo2ForCausalLM");
  expect_export_matches_hf("olmo2 untied unpadded",
                           with(with(kPost, "model.tied_embeddings=false"), "model.vocab_size=512"), "Olmo2ForCausalLM");
}
