// model.init_from end to end: a Hugging Face folder that asteria-export wrote is read back as the
// exact parameters (fp32 bit for bit, bf16 as its bf16 values), and a run started from it trains
// bit for bit as the run that started from those parameters itself, on one rank and with the
// layers sharded over two (each rank reading only its rows); bad folders are refused at startup.
#include <gtest/gtest.h>

#include <filesystem>

#include "core/bf16.hpp"
#include "export_fixture.hpp"
#include "hf/hf_weights.hpp"
#include "trainer_runs.hpp"

using namespace asteria;
using namespace asteria::testing;

namespace {

const std::vector<std::string> kOlmo2 = {"model.norm=rmsnorm", "model.norm_placement=post", "model.qk_norm=true",
                                         "model.norm_eps=1e-6", "model.rope_theta=500000", "model.tied_embeddings=false"};

// dir/ckpt: the parameters a run of `cfg` starts from (its seed's init), as a checkpoint; then
// exported to dir/<out> as `dtype`.
void export_initial_model(const TempDir& dir, const Config& cfg, const std::string& out, const std::string& dtype) {
  if (!std::filesystem::exists(dir.file("ckpt"))) {
    Model<float> m(cfg.model, 1);
    m.init(cfg.seed);
    write_checkpoint(dir.file("ckpt"), cfg, m, 1);
  }
  std::string log;
  ASSERT_EQ(run_command(export_command("--checkpoint " + dir.file("ckpt") + " --out " + dir.file(out) + " --dtype " + dtype),
                        &log), 0) << log;
}

std::vector<std::string> run_sets(const TempDir& dir, const std::string& run) {
  std::vector<std::string> s = kOlmo2;
  for (const std::string& x : std::vector<std::string>{"data.train=" + dir.file("train.bin"), "run.dir=" + dir.file(run), "train.steps=4",
                               "train.micro_batch=2", "optim.name=soap", "optim.lr=3e-3", "optim.precondition_frequency=2",
                               "checkpoint.enabled=false", "runtime.mode=native"})
    s.push_back(x);
  return s;
}

}  // namespace

TEST(Import, AnExportReadsBackAsTheExactParameters) {
  TempDir dir("import-rt");
  const Config cfg = export_config(kOlmo2);
  export_initial_model(dir, cfg, "f32", "fp32");
  export_initial_model(dir, cfg, "b16", "bf16");
  Model<float> m(cfg.model, 1);
  m.init(cfg.seed);
  const hf::HfWeights f32(dir.file("f32"), cfg.model), b16(dir.file("b16"), cfg.model);
  for (int l = 0; l < m.num_layers(); l++) {
    const size_t n = m.table(l).numel;
    std::vector<float> a(n), b(n);
    f32.fill(l, 0, n, a.data());
    b16.fill(l, 0, n, b.data());
    for (size_t i = 0; i < n; i++) {
      ASSERT_EQ(std::memcmp(&a[i], m.params(l) + i, 4), 0) << m.layer_name(l) << "[" << i << "]";
      ASSERT_EQ(b[i], to_float(to_bf16(m.params(l)[i]))) << m.layer_name(l) << "[" << i << "]";
    }
  }
}

TEST(Import, ARunFromTheFolderTrainsAsTheRunFromItsParameters) {
  TempDir dir("import-run");
  write_bigram_tokens(dir.file("train.bin"), 20000, 500, 3);
  const Config straight = export_config(run_sets(dir, "straight"));
  export_initial_model(dir, straight, "hf", "fp32");
  std::vector<std::string> sets = run_sets(dir, "imported");
  sets.push_back("model.init_from=" + dir.file("hf"));
  const Config imported = export_config(sets);
  EXPECT_EQ(imported.model.d_model, straight.model.d_model);
  const std::vector<float> a = train_params(straight), b = train_params(imported);
  EXPECT_TRUE(same_bits(a, b));
  const std::vector<double> la = losses(dir.file("straight")), lb = losses(dir.file("imported"));
  ASSERT_EQ(la.size(), 4u);
  EXPECT_EQ(la, lb);
}

TEST(Import, ShardedRanksReadTheirRowsAndTrainAsFromTheirOwnInit) {
  TempDir dir("import-ranks");
  write_bigram_tokens(dir.file("train.bin"), 20000, 500, 3);
  std::ofstream(dir.file("c.yaml")) << "seed: 5\nmodel:\n  preset: tiny\n";
  const Config cfg = export_config(run_sets(dir, "x"));
  export_initial_model(dir, cfg, "hf", "bf16");
  // One rank from the folder is the reference; two ranks, sharded (each reads only its rows) and
  // replicated, must train as it does.
  std::string sets;
  for (const std::string& s : run_sets(dir, "RUN")) sets += " --set " + s;
  // AdamW: SOAP's first bases depend on rounding, which ranks change (its comparisons start warm).
  sets += " --set model.n_heads=4 --set model.vocab_size=500 --set model.init_std=0.15 --set optim.name=adamw"
          " --set model.init_from=" + dir.file("hf");
  auto cmd = [&](const std::string& run, int ranks, const std::string& fsdp) {
    std::string s = sets;
    s.replace(s.find("RUN"), 3, run);
    // The same global batch of 2 instances: 2 on one rank, 1 on each of two.
    return kMpirun + "-np " + std::to_string(ranks) + " " + kTrain + " --config " + dir.file("c.yaml") + s +
           " --set distributed.fsdp=" + fsdp + " --set train.micro_batch=" + std::to_string(2 / ranks);
  };
  std::string log;
  ASSERT_EQ(run_command(cmd("one", 1, "full"), &log), 0) << log;
  EXPECT_NE(log.find("parameters from Hugging Face folder " + dir.file("hf")), std::string::npos) << log;
  ASSERT_EQ(run_command(cmd("full", 2, "full"), &log), 0) << log;
  ASSERT_EQ(run_command(cmd("none", 2, "none"), &log), 0) << log;
  const std::vector<double> one = losses(dir.file("one")), full = losses(dir.file("full")), none = losses(dir.file("none"));
  ASSERT_EQ(one.size(), 4u);
  // One rank and two hold the same global batch; the sums round in another order.
  EXPECT_LT(std::abs(one[0] - full[0]), 1e-6 * one[0]);   // the first loss is the imported parameters' alone
  EXPECT_LT(std::abs(one[0] - none[0]), 1e-6 * one[0]);
  EXPECT_LT(worst_relative(one, full), 1e-5);
  EXPECT_LT(worst_relative(one, none), 1e-5);
}

TEST(Import, BadFoldersAreRefusedAtStartupNamingTheFileAndTensor) {
  TempDir dir("import-bad");
  write_bigram_tokens(dir.file("train.bin"), 20000, 500, 3);
  const Config cfg = export_config(run_sets(dir, "x"));
  export_initial_model(dir, cfg, "hf", "fp32");
  std::ofstream(dir.file("c.yaml")) << "seed: 5\nmodel:\n  preset: tiny\n  n_heads: 4\n  vocab_size: 500\n";
  std::string base;
  for (const std::string& s : run_sets(dir, "run")) base += " --set " + s;
  auto train = [&](const std::string& extra, std::string* log) {
    return run_command(kTrain + " --config " + dir.file("c.yaml") + base + extra, log);
  };
  std::string log;
  // A truncated weights file: refused before anything is written into run.dir.
  const std::string st = dir.file("hf/model.safetensors");
  std::filesystem::resize_file(st, std::filesystem::file_size(st) - 100);
  EXPECT_EQ(train(" --set model.init_from=" + dir.file("hf"), &log), 1) << log;
  EXPECT_NE(log.find(st), std::string::npos) << log;
  EXPECT_NE(log.find("truncated"), std::string::npos) << log;
  EXPECT_FALSE(std::filesystem::exists(dir.file("run/metrics.jsonl")));
  // A config.json of another architecture; a disagreeing model key.
  std::filesystem::create_directories(dir.file("llama"));
  std::ofstream(dir.file("llama/config.json")) << R"({"model_type": "llama", "architectures": ["LlamaForCausalLM"]})";
  EXPECT_EQ(train(" --set model.init_from=" + dir.file("llama"), &log), 1) << log;
  EXPECT_NE(log.find("model_type 'llama'"), std::string::npos) << log;
  EXPECT_EQ(train(" --set model.init_from=" + dir.file("hf") + " --set model.d_model=32", &log), 1) << log;
  EXPECT_NE(log.find("model.d_model is 32"), std::string::npos) << log;
}

TEST(Import, TheContinuedPretrainingRecipesAgreeWithThePublishedConfigs) {
  // config.json as the published folders have it (allenai/OLMo-1B-hf, allenai/OLMo-2-0425-1B).
  TempDir dir("import-recipes");
  const nlohmann::json olmo1 = {{"architectures", {"OlmoForCausalLM"}}, {"model_type", "olmo"}, {"hidden_size", 2048},
                                {"intermediate_size", 8192}, {"num_hidden_layers", 16}, {"num_attention_heads", 16},
                                {"num_key_value_heads", 16}, {"hidden_act", "silu"}, {"vocab_size", 50304},
                                {"max_position_embeddings", 2048}, {"rope_theta", 10000.0}, {"rope_scaling", nullptr},
                                {"attention_bias", false}, {"attention_dropout", 0.0}, {"clip_qkv", nullptr},
                                {"tie_word_embeddings", true}, {"pad_token_id", 1}, {"eos_token_id", 50279},
                                {"torch_dtype", "float32"}, {"use_cache", true}};
  nlohmann::json olmo2 = olmo1;
  olmo2.erase("clip_qkv");
  olmo2.update({{"architectures", {"Olmo2ForCausalLM"}}, {"model_type", "olmo2"}, {"vocab_size", 100352},
                {"max_position_embeddings", 4096}, {"rope_theta", 500000.0}, {"rms_norm_eps", 1e-6},
                {"tie_word_embeddings", false}, {"eos_token_id", 100257}, {"pad_token_id", 100277}, {"torch_dtype", "bfloat16"}});
  for (const auto& [recipe, json] : {std::pair{"olmo-1b-soap-continue", olmo1}, std::pair{"olmo2-1b-soap-continue", olmo2}}) {
    std::filesystem::create_directories(dir.file(recipe));
    std::ofstream(dir.file(std::string(recipe) + "/config.json")) << json.dump();
    std::string out;
    ASSERT_EQ(run_command(kTrain + " --config " + kConfigs + "/" + recipe + ".yaml --set model.init_from=" +
                              dir.file(recipe) + " --dry-run", &out), 0) << out;
    EXPECT_NE(out.find("init_from: \"" + dir.file(recipe) + "\""), std::string::npos) << out;
  }
}
