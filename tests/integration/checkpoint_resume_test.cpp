// Bit-exact resume: 2N steps straight against N steps (train.stop_after, which leaves the LR
// schedule alone), a checkpoint, and a resumed run to 2N. Every step's loss (metrics.jsonl of
// the resumed run.dir reads as one run) and the final parameters must be identical bit for bit,
// for every optimizer, native and asteria (root jobs in flight across the checkpoint, on the
// compute lane and on workers; a checkpoint at a refresh step), grad accumulation, state on the
// disk tier, and asynchronous writes (from a copy) and synchronous ones (straight from each tier).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "train/checkpoint/checkpoint_store.hpp"
#include "train/tier_config.hpp"
#include "trainer_runs.hpp"

using namespace asteria;
using asteria::testing::same_bits;
using asteria::testing::TempDir;
using asteria::testing::losses;

namespace {

struct ResumeCase {
  const char* name;
  const char* optimizer;
  std::vector<std::string> sets;
  int half = 5;   // N
};


class Resume : public ::testing::TestWithParam<ResumeCase> {
 protected:
  void SetUp() override {
    dir_ = std::make_unique<TempDir>(std::string("resume-") + GetParam().name);
    asteria::testing::write_bigram_tokens(dir_->file("train.bin"), 20000, 512, 3);
  }
  Config config(const std::string& run, std::vector<std::string> extra) const {
    const ResumeCase& c = GetParam();
    std::vector<std::string> sets = asteria::testing::short_second_order_sets(*dir_, c.optimizer, 2 * c.half);
    sets.push_back("run.dir=" + dir_->file(run));
    sets.insert(sets.end(), c.sets.begin(), c.sets.end());
    sets.insert(sets.end(), extra.begin(), extra.end());
    return load_config_text("seed: 9\nmodel:\n  preset: tiny\n  n_layers: 2\n", "resume.yaml", sets);
  }
  std::unique_ptr<TempDir> dir_;
};

}  // namespace

TEST_P(Resume, StoppedAndResumedEqualsStraightBitForBit) {
  const int N = GetParam().half;
  const std::vector<float> straight = asteria::testing::train_params(config("straight", {}));
  {
    Trainer first(config("resumed", {"train.stop_after=" + std::to_string(N)}));
    const TrainResult r = first.run();
    ASSERT_EQ(r.last_step, N);
    ASSERT_EQ(r.checkpoint, dir_->file("resumed") + "/checkpoints/" + checkpoint_dir_name(N));
  }
  // The interrupted run's metrics of steps after the checkpoint are dropped on resume; fake one.
  { std::ofstream(dir_->file("resumed") + "/metrics.jsonl", std::ios::app) << "{\"step\": 99, \"loss\": 1.0}\n"; }
  const std::vector<float> resumed = asteria::testing::train_params(config("resumed", {"checkpoint.resume=latest"}));
  EXPECT_TRUE(same_bits(straight, resumed)) << "final parameters differ";
  const std::vector<double> a = losses(dir_->file("straight")), b = losses(dir_->file("resumed"));
  ASSERT_EQ(a.size(), static_cast<size_t>(2 * N));
  ASSERT_EQ(b.size(), a.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i], b[i]) << "loss of step " << i + 1;
  EXPECT_EQ(list_checkpoints(dir_->file("resumed") + "/checkpoints").back().step, 2 * N);
}

// The disk-tier case: a quarter of the state on the host, the rest on disk (as in tiers_test).
std::vector<std::string> disk_tier_sets() {
  TempDir d("resume-layout");
  return asteria::testing::quarter_host_rest_disk(load_config_text(
      "seed: 9\nmodel:\n  preset: tiny\n  n_layers: 2\n", "r.yaml", asteria::testing::short_second_order_sets(d, "soap", 10)));
}

// Refreshes every 3 steps from step 2 (short_second_order_sets): SOAP and KL-Shampoo refresh at
// 4, 7, 10, Shampoo at 2, 3, 6, 9. With D = 3 the refresh of step 4 is in flight at step 5; a
// checkpoint at 7 (N = 7, a refresh step) has the refresh of 7 in flight. Each optimizer in
// native mode (the reference, asked for by name) and in asteria mode; the cases that set no mode
// (grad accumulation, the disk tier, synchronous writes) run the default, asteria.
INSTANTIATE_TEST_SUITE_P(
    Cases, Resume,
    ::testing::Values(
        ResumeCase{"adamw", "adamw", {}}, ResumeCase{"muon", "muon", {"optim.lr=0.02"}},
        ResumeCase{"muon_disk_tier", "muon", [] {
                     std::vector<std::string> s = disk_tier_sets();
                     s.push_back("optim.lr=0.02");
                     return s;
                   }()},
        ResumeCase{"shampoo_native", "shampoo", {"runtime.mode=native"}},
        ResumeCase{"soap_native", "soap", {"runtime.mode=native"}},
        ResumeCase{"kl_shampoo_native", "kl_shampoo", {"runtime.mode=native"}},
        ResumeCase{"soap_asteria_compute", "soap", {"runtime.mode=asteria", "runtime.shadow.delay=3", "runtime.shadow.lane=compute"}},
        ResumeCase{"shampoo_asteria_workers", "shampoo", {"runtime.mode=asteria", "runtime.shadow.delay=3", "runtime.shadow.lane=workers"}},
        ResumeCase{"kl_asteria_at_refresh_step", "kl_shampoo", {"runtime.mode=asteria", "runtime.shadow.delay=3"}, 7},
        ResumeCase{"soap_asteria_stagger", "soap", {"runtime.mode=asteria", "runtime.shadow.delay=2", "runtime.stagger=true"}},
        // The refreshes in flight parked on the disk tier (one job in memory) at the checkpoint.
        ResumeCase{"soap_asteria_parked_jobs", "soap",
                   {"runtime.mode=asteria", "runtime.shadow.delay=2", "runtime.stagger=true", "runtime.shadow.resident_jobs=1"}},
        ResumeCase{"grad_accum_2", "soap", {"train.grad_accum=2"}},
        ResumeCase{"disk_tier", "soap", disk_tier_sets()},
        ResumeCase{"disk_tier_written_from_the_tiers", "kl_shampoo", [] {
                     std::vector<std::string> s = disk_tier_sets();
                     s.push_back("checkpoint.async=false");   // no copy: straight from each tier
                     return s;
                   }()},
        ResumeCase{"synchronous_writes", "shampoo", {"checkpoint.async=false", "checkpoint.every=2"}}),
    [](const auto& info) { return std::string(info.param.name); });

// A checkpoint saved before activation recompute had its name (its config says
// train.activation_checkpointing / train.checkpoint_every_k) still resumes: the saved config is
// read with the old keys under their new names, and then matches today's key by key.
TEST(ResumeRenamedKeys, ActivationRecomputeFromTheOldKeysOfASavedConfig) {
  TempDir dir("resume-renamed-keys");
  asteria::testing::write_bigram_tokens(dir.file("train.bin"), 20000, 512, 3);
  auto config = [&](std::vector<std::string> extra) {
    std::vector<std::string> sets = asteria::testing::short_second_order_sets(dir, "adamw", 4);
    sets.insert(sets.end(), {"run.dir=" + dir.file("run"), "train.activation_recompute=every_k",
                             "train.recompute_every_k=3"});
    sets.insert(sets.end(), extra.begin(), extra.end());
    return load_config_text("seed: 9\nmodel:\n  preset: tiny\n  n_layers: 2\n", "resume.yaml", sets);
  };
  std::string checkpoint;
  {
    Trainer first(config({"train.stop_after=2"}));
    checkpoint = first.run().checkpoint;
  }
  const std::string manifest_path = checkpoint + "/manifest.json";
  nlohmann::json manifest = nlohmann::json::parse(std::ifstream(manifest_path));
  std::string text = manifest["config"].get<std::string>();
  for (const auto& [now, before] : {std::pair<std::string, std::string>{"activation_recompute:", "activation_checkpointing:"},
                                    {"recompute_every_k:", "checkpoint_every_k:"}}) {
    const size_t at = text.find(now);
    ASSERT_NE(at, std::string::npos) << text;
    text.replace(at, now.size(), before);
  }
  manifest["config"] = text;
  manifest["config_hash"] = text_xxh3(text);
  std::ofstream(manifest_path) << manifest.dump(1);
  Trainer resumed(config({"checkpoint.resume=latest"}));
  EXPECT_EQ(resumed.run().last_step, 4);
}
