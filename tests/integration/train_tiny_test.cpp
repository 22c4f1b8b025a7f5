// End to end: the tiny model trained on a token file made here; determinism; run outputs.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/cpu/gemm_routing.hpp"
#include "core/error.hpp"
#include "trainer_runs.hpp"
#include "config/config.hpp"
#include "train/trainer.hpp"

using namespace asteria;
using asteria::testing::TempDir;

namespace {

Config tiny_config(const TempDir& dir, std::vector<std::string> extra = {}) {
  std::vector<std::string> sets = {"data.train=" + dir.file("train.bin"),
                                   "data.eval=" + dir.file("val.bin"),
                                   "run.dir=" + dir.file("run"),
                                   "train.steps=100",
                                   "train.micro_batch=8",
                                   "train.warmup_steps=5",
                                   "train.eval_every=20",
                                   "optim.lr=1e-2",
                                   "data.eval_batches=2",
                                   "run.overwrite=true"};
  sets.insert(sets.end(), extra.begin(), extra.end());
  return load_config_text("seed: 3\nmodel:\n  preset: tiny\n", "tiny.yaml", sets);
}

void make_data(const TempDir& dir) {
  asteria::testing::write_bigram_tokens(dir.file("train.bin"), 60000, 512, 1);
  asteria::testing::write_bigram_tokens(dir.file("val.bin"), 6000, 512, 2);
}

}  // namespace

TEST(TrainTiny, LossFallsWellBelowLnVocabAndOutputsAreWritten) {
  TempDir dir("train-tiny");
  make_data(dir);
  Config cfg = tiny_config(dir);
  Trainer trainer(cfg);
  TrainResult r = trainer.run();
  const double ln_vocab = std::log(512.0);
  EXPECT_LT(r.final_loss, 0.5 * ln_vocab) << "final train loss " << r.final_loss;
  EXPECT_LT(r.final_eval_loss, 0.5 * ln_vocab) << "final eval loss " << r.final_eval_loss;
  EXPECT_GT(r.tokens_per_s, 0);

  std::ifstream in(dir.file("run/metrics.jsonl"));
  std::string line;
  int lines = 0, evals = 0;
  double first_loss = 0;
  bool first_has_energy = false;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line);
    ++lines;
    for (const char* k : {"step", "loss", "lr", "grad_norm", "tokens_per_s", "mfu", "step_time_s", "fwd_s",
                          "bwd_s", "optim_s"})
      EXPECT_TRUE(j.contains(k)) << k;
    if (lines == 1) {
      first_loss = j["loss"];
      first_has_energy = j.contains("energy_j");
    }
    if (j.contains("eval_loss")) ++evals;
  }
  EXPECT_EQ(lines, 100);
  EXPECT_EQ(evals, 5);  // steps 20, 40, 60, 80, 100
  EXPECT_NEAR(first_loss, ln_vocab, 0.5);  // starts near uniform

  // The resolved config is written and reads back to the same config.
  Config again = load_config(dir.file("run/config.yaml"));
  EXPECT_EQ(config_to_yaml(again), config_to_yaml(cfg));

  // run_info.json says which library ran the GEMMs and where the energy figures come from, or
  // why there are none (then the records carry no energy_j).
  const nlohmann::json info = nlohmann::json::parse(std::ifstream(dir.file("run/run_info.json")));
  EXPECT_EQ(info["gemm"]["setting"], "auto");
  EXPECT_FALSE(info["gemm"]["fp32"].get<std::string>().empty());
  const std::string energy = info["energy"];
  EXPECT_FALSE(energy.empty());
  EXPECT_EQ(first_has_energy, energy.rfind("RAPL", 0) == 0) << energy;
}

// Trains the tiny config with `extra` and returns each layer's final parameters.
std::vector<std::vector<float>> train_layers(const TempDir& dir, const std::vector<std::string>& extra) {
  Config cfg = tiny_config(dir, extra);
  Trainer t(cfg);
  t.run();
  std::vector<std::vector<float>> p;
  for (int l = 0; l < t.num_layers(); ++l) p.push_back(t.final_params(l));
  return p;
}

TEST(TrainTiny, SameSeedGivesSameBitsAndGradAccumTrains) {
  TempDir dir("train-det");
  make_data(dir);
  auto train = [&](std::vector<std::string> extra) { return train_layers(dir, extra); };
  auto a = train({"train.steps=8"});
  auto b = train({"train.steps=8"});
  ASSERT_EQ(a.size(), b.size());
  for (size_t l = 0; l < a.size(); ++l)
    EXPECT_EQ(0, std::memcmp(a[l].data(), b[l].data(), a[l].size() * sizeof(float))) << "layer " << l;
  auto c = train({"train.steps=8", "seed=4"});
  EXPECT_NE(0, std::memcmp(a[1].data(), c[1].data(), a[1].size() * sizeof(float)));
  // Two micro-batches of 4 make a different (but finite, trained) model than one of 8.
  auto d = train({"train.steps=8", "train.micro_batch=4", "train.grad_accum=2"});
  for (float x : d[1]) ASSERT_TRUE(std::isfinite(x));
}

// train.activation_recompute through the trainer: the plan's recompute ops give the same
// bits as keeping every activation, with two micro-batches and FSDP-free single-process
// training, at both precisions (bf16: kept activations packed as bf16, recomputed ones rounded
// in place), and the time they take is reported as recompute_s.
TEST(TrainTiny, ActivationRecomputeTrainsTheSameBits) {
  TempDir dir("train-ckpt");
  make_data(dir);
  for (const char* precision : {"fp32", "bf16"}) {
    auto train = [&](std::vector<std::string> extra) {
      extra.insert(extra.end(), {"train.steps=4", "train.micro_batch=4", "train.grad_accum=2",
                                 std::string("runtime.precision=") + precision});
      return train_layers(dir, extra);
    };
    const auto ref = train({});
    for (const char* mode : {"blocks", "every_k"}) {
      const auto p = train({std::string("train.activation_recompute=") + mode});
      ASSERT_EQ(p.size(), ref.size());
      for (size_t l = 0; l < p.size(); ++l)
        EXPECT_EQ(0, std::memcmp(p[l].data(), ref[l].data(), p[l].size() * sizeof(float)))
            << precision << " " << mode << " layer " << l;
      std::ifstream metrics(dir.file("run/metrics.jsonl"));
      std::string line;
      ASSERT_TRUE(std::getline(metrics, line));
      const auto j = nlohmann::json::parse(line);
      ASSERT_TRUE(j.contains("recompute_s")) << line;
      EXPECT_GT(j["recompute_s"].get<double>(), 0.0) << mode;
    }
  }
}

// runtime.precision bf16 on the CPU trains as fp32 does: 100 steps of the tiny model end within
// 2 % of fp32's final train and eval loss (the GEMMs see 8 significant bits; the sums, the
// residual stream, the parameters and the optimizer stay fp32), and not on the same bits.
TEST(TrainTiny, Bf16TrainsLikeFp32) {
  TempDir dir("train-bf16");
  make_data(dir);
  TrainResult r[2];
  const char* precisions[2] = {"fp32", "bf16"};
  for (int i = 0; i < 2; i++) {
    Trainer t(tiny_config(dir, {std::string("runtime.precision=") + precisions[i]}));
    r[i] = t.run();
  }
  EXPECT_NEAR(r[1].final_loss, r[0].final_loss, 0.02 * r[0].final_loss);
  EXPECT_NEAR(r[1].final_eval_loss, r[0].final_eval_loss, 0.02 * r[0].final_eval_loss);
  EXPECT_NE(r[1].final_loss, r[0].final_loss);
}

// runtime.gemm: the same 20 steps with every fp32 GEMM on OpenBLAS, on oneDNN, and routed by
// auto (the default) train the same losses within fp32 rounding (the libraries sum in different
// orders; 20 steps of AdamW and of SOAP, whose rotations and factor updates go through the same
// GEMMs, magnify that to about 1e-5 of the loss here), and oneDNN's bits repeat.
TEST(TrainTiny, GemmLibrariesTrainTheSameLosses) {
  TempDir dir("train-gemm");
  make_data(dir);
  for (const char* optimizer : {"adamw", "soap"}) {
    std::vector<std::vector<double>> runs;
    for (const char* gemm : {"openblas", "onednn", "auto", "onednn"}) {
      Trainer t(tiny_config(dir, {"train.steps=20", std::string("optim.name=") + optimizer,
                                  std::string("runtime.gemm=") + gemm}));
      t.run();
      runs.push_back(asteria::testing::losses(dir.file("run")));
      ASSERT_EQ(runs.back().size(), 20u) << gemm;
    }
    set_gemm_choice(GemmChoice::Auto);
    for (size_t r = 1; r < 3; r++)
      for (size_t i = 0; i < 20; i++)
        EXPECT_NEAR(runs[r][i], runs[0][i], 2e-4 * runs[0][i]) << optimizer << " run " << r << " step " << i + 1;
    EXPECT_EQ(runs[3], runs[1]) << optimizer << ": oneDNN's losses not the same bits twice";
  }
}

TEST(TrainTiny, BadDataIsRefusedBeforeAnythingIsWritten) {
  TempDir dir("train-bad");
  make_data(dir);
  auto expect_refused = [&](std::vector<std::string> extra, const std::string& needle) {
    try {
      Config cfg = tiny_config(dir, extra);
      Trainer t(cfg);
      FAIL() << "expected an error containing " << needle;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_refused({"data.train=" + dir.file("missing.bin")}, "missing.bin");
  // Ids up to 511 do not fit a 300-token vocabulary.
  expect_refused({"model.vocab_size=300"}, "train.bin");
  // A sequence longer than the whole validation file.
  asteria::testing::write_bigram_tokens(dir.file("short.bin"), 40, 512, 3);
  expect_refused({"data.eval=" + dir.file("short.bin")}, "short.bin");
  expect_refused({"checkpoint.resume=" + dir.file("nothing")}, "not a checkpoint directory");
  EXPECT_FALSE(std::filesystem::exists(dir.file("run")));

  // An existing run is not overwritten unless asked.
  std::filesystem::create_directories(dir.file("run"));
  { std::ofstream(dir.file("run/metrics.jsonl")) << "{\"step\": 1}\n"; }
  expect_refused({"run.overwrite=false"}, "already holds a run");
  std::ifstream in(dir.file("run/metrics.jsonl"));
  std::string s((std::istreambuf_iterator<char>(in)), {});
  EXPECT_EQ(s, "{\"step\": 1}\n");
}

// Each second-order optimizer (and Muon) trains the tiny model, and the same seed gives the same bits.
class TrainTinySecondOrder : public ::testing::TestWithParam<const char*> {};

TEST_P(TrainTinySecondOrder, TrainsAndIsDeterministic) {
  TempDir dir(std::string("train-") + GetParam());
  make_data(dir);
  std::vector<std::string> sets = {std::string("optim.name=") + GetParam(), "optim.precondition_frequency=5",
                                   "optim.weight_decay=0.0"};
  if (std::string(GetParam()) == "shampoo")
    for (const char* s : {"optim.shampoo_beta=0.95", "optim.root_eps=1e-8"}) sets.push_back(s);
  // KL-Shampoo's eigenvalue estimates start at kl_init_factor and follow the statistics slowly
  // (beta2); this model's gradients are far smaller than that start.
  if (std::string(GetParam()) == "kl_shampoo")
    for (const char* s : {"optim.kl_init_factor=1e-3", "optim.betas=[0.9,0.95]"}) sets.push_back(s);
  // Muon's auxiliary Adam (embedding, head, vectors) defaults to the reference's 3e-4, tuned for
  // long runs; this 100-step run gives it the rate the tiny model's AdamW uses.
  if (std::string(GetParam()) == "muon") sets.push_back("optim.adamw_1d.lr=1e-2");
  Config cfg = tiny_config(dir, sets);
  Trainer t(cfg);
  TrainResult r = t.run();
  EXPECT_LT(r.final_eval_loss, 0.5 * std::log(512.0)) << GetParam();
  // Same config, same seed: the same parameters to the bit (a short run).
  auto run_short = [&] {
    Config c = tiny_config(dir, sets);
    c.train.steps = 12;
    return asteria::testing::train_params(c);
  };
  auto a = run_short(), b = run_short();
  ASSERT_EQ(a.size(), b.size());
  EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float))) << GetParam();
}

INSTANTIATE_TEST_SUITE_P(Optimizers, TrainTinySecondOrder, ::testing::Values("shampoo", "soap", "kl_shampoo", "muon"));
