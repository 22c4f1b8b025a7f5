// What asteria-export writes besides the fp32 logits check: bf16 tensors (header dtype, values
// rounded to nearest from fp32) and the tokenizer (found next to data.train or given, its ids
// noted and carried into config.json).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "export_fixture.hpp"

using namespace asteria;
using namespace asteria::testing;

namespace {

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

void write_model_checkpoint(const TempDir& dir, const Config& cfg) {
  Model<float> m(cfg.model, 1);
  init_model(m, 4);
  write_checkpoint(dir.file("ckpt"), cfg, m, 9);
}

std::string export_to(const TempDir& dir, const std::string& out, const std::string& extra = "") {
  return export_command("--checkpoint " + dir.file("ckpt") + " --out " + dir.file(out) + extra);
}

// Half a bf16 ulp of x (8 significant bits): the most round-to-nearest may move it.
double half_bf16_ulp(double x) {
  int e;
  std::frexp(x, &e);   // |x| in [2^(e-1), 2^e)
  return std::ldexp(1.0, e - 9);
}

}  // namespace

TEST(Export, Bf16TensorsAreFp32RoundedToNearest) {
  TempDir dir("export-bf16");
  write_model_checkpoint(dir, export_config({"model.norm=rmsnorm", "model.norm_placement=post",
                                             "model.qk_norm=true", "model.tied_embeddings=false"}));
  std::string log;
  ASSERT_EQ(run_command(export_to(dir, "f32"), &log), 0) << log;
  ASSERT_EQ(run_command(export_to(dir, "b16", " --dtype bf16"), &log), 0) << log;
  EXPECT_EQ(read_json(dir.file("b16/config.json"))["torch_dtype"], "bfloat16");

  const SafetensorsFile f32 = read_safetensors(dir.file("f32/model.safetensors"));
  const SafetensorsFile b16 = read_safetensors(dir.file("b16/model.safetensors"));
  EXPECT_EQ(b16.header["__metadata__"], (nlohmann::json{{"format", "pt"}}));
  ASSERT_EQ(f32.header.size(), b16.header.size());
  size_t checked = 0;
  for (const auto& [name, t] : f32.header.items()) {
    if (name == "__metadata__") continue;
    ASSERT_TRUE(b16.header.contains(name)) << name;
    const auto& u = b16.header[name];
    EXPECT_EQ(t["dtype"], "F32");
    EXPECT_EQ(u["dtype"], "BF16") << name;
    EXPECT_EQ(u["shape"], t["shape"]) << name;
    size_t n = 1;
    for (const auto& s : t["shape"]) n *= s.get<size_t>();
    EXPECT_EQ(u["data_offsets"][1].get<size_t>() - u["data_offsets"][0].get<size_t>(), 2 * n);
    for (size_t i = 0; i < n; i++) {
      const double x = safetensors_value(f32, name, i), y = safetensors_value(b16, name, i);
      ASSERT_LE(std::abs(y - x), half_bf16_ulp(x)) << name << "[" << i << "] " << x << " -> " << y;
    }
    checked += n;
  }
  EXPECT_GT(checked, 100000u);

  // The reference reads BF16 too; its logits stay near the fp32 ones.
  const ModelConfig mc = export_config({}).model;
  write_tokens(dir.file("tokens.txt"), random_tokens(mc, 1, 8), mc.seq_len);
  ASSERT_EQ(run_command(hf_reference_command(dir.file("f32"), dir.file("tokens.txt"), dir.file("l32")), &log), 0) << log;
  ASSERT_EQ(run_command(hf_reference_command(dir.file("b16"), dir.file("tokens.txt"), dir.file("l16")), &log), 0) << log;
  const auto l32 = read_f64(dir.file("l32.f64")), l16 = read_f64(dir.file("l16.f64"));
  ASSERT_EQ(l32.size(), l16.size());
  double diff = 0, scale = 0;
  for (size_t i = 0; i < l32.size(); i++) {
    diff = std::max(diff, std::abs(l16[i] - l32[i]));
    scale = std::max(scale, std::abs(l32[i]));
  }
  EXPECT_LT(diff / scale, 5e-2);
  EXPECT_GT(diff, 0.0);
}

TEST(Export, TokenizerNextToTrainDataIsCopiedWithItsIds) {
  TempDir dir("export-tok");
  prepare_data(dir);
  write_model_checkpoint(dir, export_config({"data.train=" + dir.file("data/train.bin")}));
  std::string log;
  ASSERT_EQ(run_command(export_to(dir, "hf"), &log), 0) << log;
  EXPECT_TRUE(contains(log, "tokenizer: " + dir.file("data/tokenizer.model"))) << log;
  EXPECT_EQ(read_file_bytes(dir.file("hf/tokenizer.model")),
            read_file_bytes(dir.file("data/tokenizer.model")));

  // And as Hugging Face's files (their encoding is checked in Hugging Face's implementation by
  // tests/data/sentencepiece_to_hf_test.cpp): the same vocabulary, its end-of-document token.
  const nlohmann::json hf_tok = read_json(dir.file("hf/tokenizer.json"));
  EXPECT_EQ(hf_tok["model"]["vocab"].size(), 300u);
  EXPECT_EQ(read_json(dir.file("hf/tokenizer_config.json"))["eos_token"], "</s>");
  EXPECT_EQ(read_json(dir.file("hf/special_tokens_map.json"))["eos_token"], "</s>");

  const nlohmann::json note = read_json(dir.file("hf/tokenizer_note.json"));
  EXPECT_EQ(note["file"], "tokenizer.model");
  EXPECT_EQ(note["vocab_size"], 300);
  EXPECT_EQ(note["eos_id"], 1);
  EXPECT_EQ(note["unk_id"], 0);
  EXPECT_EQ(note["bos_id"], -1);
  EXPECT_EQ(note["pad_id"], -1);
  EXPECT_EQ(note["pieces"]["eos"], "</s>");
  EXPECT_TRUE(contains(note["found_by"], "data.json")) << note.dump();
  EXPECT_EQ(note["model_vocab_size"], 500);
  EXPECT_EQ(note["embedding_size"], 512);

  const nlohmann::json cfg = read_json(dir.file("hf/config.json"));
  EXPECT_EQ(cfg["eos_token_id"], 1);
  EXPECT_TRUE(cfg["bos_token_id"].is_null());
  EXPECT_TRUE(cfg["pad_token_id"].is_null());
}

TEST(Export, TokenizerModelBesideTrainFileOrGivenIsUsed) {
  TempDir dir("export-tok2");
  prepare_data(dir);
  // No data.json there: tokenizer.model in data.train's folder is taken.
  std::filesystem::create_directories(dir.file("other"));
  std::filesystem::copy_file(dir.file("data/tokenizer.model"), dir.file("other/tokenizer.model"));
  write_model_checkpoint(dir, export_config({"data.train=" + dir.file("other/train.bin")}));
  std::string log;
  ASSERT_EQ(run_command(export_to(dir, "hf"), &log), 0) << log;
  EXPECT_TRUE(contains(read_json(dir.file("hf/tokenizer_note.json"))["found_by"], "next to data.train"));

  // --tokenizer wins; a file that is not a tokenizer is refused by name and nothing is written.
  ASSERT_EQ(run_command(export_to(dir, "hf2", " --tokenizer " + dir.file("data/tokenizer.model")), &log), 0)
      << log;
  EXPECT_EQ(read_json(dir.file("hf2/tokenizer_note.json"))["found_by"], "--tokenizer");
  EXPECT_EQ(run_command(export_to(dir, "hf3", " --tokenizer " + dir.file("corpus.jsonl")), &log), 1);
  EXPECT_TRUE(contains(log, "cannot load tokenizer " + dir.file("corpus.jsonl"))) << log;
  EXPECT_FALSE(std::filesystem::exists(dir.file("hf3")));
}

TEST(Export, TokenizerLargerThanTheVocabularyIsRefused) {
  TempDir dir("export-tok3");
  prepare_data(dir);
  write_model_checkpoint(dir, export_config({"model.vocab_size=290",
                                             "data.train=" + dir.file("data/train.bin")}));
  std::string log;
  EXPECT_EQ(run_command(export_to(dir, "hf"), &log), 1) << log;
  EXPECT_TRUE(contains(log, "has 300 pieces but the checkpoint's model.vocab_size is 290")) << log;
  EXPECT_FALSE(std::filesystem::exists(dir.file("hf")));
}
