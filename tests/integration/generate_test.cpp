// asteria-generate end to end: from a checkpoint (its tokenizer found next to data.train) and from
// the Hugging Face folder exported from it (the same tokens), greedy with and without the
// key/value cache (the same tokens), sampling reproducible by seed, and bad input refused.
#include <gtest/gtest.h>

#include <sstream>

#include "export_fixture.hpp"

using namespace asteria;
using namespace asteria::testing;

namespace {

const std::string kGenerate = std::string(ASTERIA_BIN_DIR) + "/asteria-generate";

// dir/data (corpus, 300-piece tokenizer, token files) and dir/ckpt: a model over that vocabulary.
void prepare(const TempDir& dir) {
  prepare_data(dir);
  const Config cfg = export_config({"data.train=" + dir.file("data/train.bin"), "model.vocab_size=300",
                                    "model.embedding_size=384", "model.init_std=0.3"});
  Model<float> m(cfg.model, 1);
  init_model(m, 4);
  write_checkpoint(dir.file("ckpt"), cfg, m, 3);
}

// What a run printed on stdout: its output without the summary line on stderr.
std::string printed(const std::string& out) {
  std::string kept;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);)
    if (line.rfind("asteria-generate:", 0) != 0) kept += line + "\n";
  return kept;
}

// The "ids:" line of a run's output.
std::string ids_line(const std::string& out) {
  const size_t at = out.find("ids: ");
  return at == std::string::npos ? "" : out.substr(at, out.find('\n', at) - at);
}

std::string generate(const std::string& args, std::string* out) {
  return std::to_string(run_command(kGenerate + " " + args, out));
}

}  // namespace

TEST(Generate, CheckpointAndItsExportGiveTheSameGreedyTokensWithAndWithoutTheCache) {
  TempDir dir("generate");
  prepare(dir);
  std::string out, log;
  const std::string prompt = " --prompt 'the whale sailed over' --max-new-tokens 12 --ignore-eos --print-ids --backend cpu";
  ASSERT_EQ(generate("--checkpoint " + dir.file("ckpt") + prompt, &out), "0") << out;
  EXPECT_EQ(printed(out).rfind("the whale sailed over", 0), 0u) << out;   // the prompt, then its continuation
  EXPECT_NE(out.find("12 new tokens"), std::string::npos) << out;
  EXPECT_NE(out.find("tokens/s (key/value cache)"), std::string::npos) << out;
  const std::string cached = ids_line(out);
  ASSERT_EQ(std::count(cached.begin(), cached.end(), ' '), 12) << out;
  ASSERT_EQ(generate("--checkpoint " + dir.file("ckpt") + prompt + " --no-cache", &out), "0") << out;
  EXPECT_EQ(ids_line(out), cached);
  EXPECT_NE(out.find("(no cache)"), std::string::npos) << out;
  // The exported folder carries the tokenizer: the same prompt, the same tokens.
  ASSERT_EQ(run_command(export_command("--checkpoint " + dir.file("ckpt") + " --out " + dir.file("hf")), &log), 0) << log;
  ASSERT_EQ(generate("--hf " + dir.file("hf") + prompt, &out), "0") << out;
  EXPECT_EQ(ids_line(out), cached);
  EXPECT_NE(out.find("Hugging Face folder"), std::string::npos) << out;
}

TEST(Generate, SamplingIsReproducibleBySeed) {
  TempDir dir("generate-seed");
  prepare(dir);
  auto sample = [&](int seed) {
    std::string out;
    EXPECT_EQ(generate("--checkpoint " + dir.file("ckpt") + " --ids '5 17 42' --max-new-tokens 20 --ignore-eos "
                       "--temperature 1.5 --top-k 50 --top-p 0.95 --print-ids --seed " + std::to_string(seed),
                       &out), "0") << out;
    return printed(out);   // the text and ids, not the timings
  };
  const std::string a = sample(1);
  EXPECT_EQ(sample(1), a);
  EXPECT_NE(sample(2), a);
  EXPECT_NE(a.find("ids: "), std::string::npos) << a;
}

TEST(Generate, BadInputIsRefusedByName) {
  TempDir dir("generate-bad");
  prepare(dir);
  std::string out;
  const std::string ck = "--checkpoint " + dir.file("ckpt");
  EXPECT_EQ(generate(ck + " --prompt x --max-new-tokens 70", &out), "1") << out;
  EXPECT_NE(out.find("exceed the context of 64 positions"), std::string::npos) << out;
  EXPECT_EQ(generate(ck + " --ids '1 x 3'", &out), "1") << out;
  EXPECT_NE(out.find("--ids: 'x' is not a token id"), std::string::npos) << out;
  EXPECT_EQ(generate(ck + " --ids '1 300'", &out), "1") << out;
  EXPECT_NE(out.find("prompt token id 300 is outside the vocabulary of 300"), std::string::npos) << out;
  EXPECT_EQ(generate(ck + " --prompt x --tokenizer " + dir.file("nowhere.model"), &out), "1") << out;
  EXPECT_NE(out.find("nowhere.model"), std::string::npos) << out;
  EXPECT_EQ(generate("--hf " + dir.file("nowhere") + " --ids 1", &out), "1") << out;
  EXPECT_NE(out.find("no config.json"), std::string::npos) << out;
  EXPECT_EQ(generate(ck + " --hf " + dir.file("ckpt") + " --ids 1", &out), "2") << out;   // two models
  // A checkpoint whose config names no data: no tokenizer for a text prompt.
  const Config bare = export_config({});
  Model<float> m(bare.model, 1);
  m.init(1);
  write_checkpoint(dir.file("bare"), bare, m, 1);
  EXPECT_EQ(generate("--checkpoint " + dir.file("bare") + " --prompt hello", &out), "1") << out;
  EXPECT_NE(out.find("--prompt needs the model's tokenizer"), std::string::npos) << out;
}
