// The shadow pipeline's determinism contract: parameters after every run are bit-identical
// whatever the number of host workers and their speed, or with the root jobs on the compute
// lane, and asteria with D = 0 and no stagger is bit-identical to native. For Shampoo, SOAP and
// KL-Shampoo.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <nlohmann/json.hpp>

#include "train/plan_description.hpp"
#include "trainer_runs.hpp"

using namespace asteria;
using asteria::testing::same_bits;
using asteria::testing::short_second_order_sets;
using asteria::testing::TempDir;
using asteria::testing::train_params;

namespace {

class ShadowDeterminism : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    dir_ = std::make_unique<TempDir>(std::string("shadow-") + GetParam());
    asteria::testing::write_bigram_tokens(dir_->file("train.bin"), 20000, 512, 1);
  }

  // The short run's config with the given overrides (base, then more).
  Config config(const std::vector<std::string>& base, const std::vector<std::string>& more = {}) {
    std::vector<std::string> sets = short_second_order_sets(*dir_, GetParam(), 14);
    sets.insert(sets.end(), base.begin(), base.end());
    sets.insert(sets.end(), more.begin(), more.end());
    return load_config_text("seed: 5\nmodel:\n  preset: tiny\n  n_layers: 1\n", "shadow.yaml", sets);
  }
  // Parameters of all layers after that run.
  std::vector<float> train(const std::vector<std::string>& base, const std::vector<std::string>& more = {}) {
    return train_params(config(base, more));
  }

  std::unique_ptr<TempDir> dir_;
};

}  // namespace

TEST_P(ShadowDeterminism, DelayZeroWithoutStaggerEqualsNative) {
  auto native = train({"runtime.mode=native"});
  // Asteria mode staggers by default (runtime.stagger auto); native does not.
  auto shadow0 = train({"runtime.mode=asteria", "runtime.stagger=false", "runtime.shadow.delay=0", "runtime.shadow.lane=workers",
                        "runtime.shadow.threads=2"});
  EXPECT_TRUE(same_bits(native, shadow0));
  auto compute0 = train({"runtime.mode=asteria", "runtime.stagger=false", "runtime.shadow.delay=0", "runtime.shadow.lane=compute"});
  EXPECT_TRUE(same_bits(native, compute0));
}

TEST_P(ShadowDeterminism, SameBitsWhateverTheWorkersAndTheirSpeed) {
  for (const char* delay : {"runtime.shadow.delay=1", "runtime.shadow.delay=2"}) {
    std::vector<std::string> base = {"runtime.mode=asteria", "runtime.stagger=true", delay};
    auto with = [&](const std::vector<std::string>& more) { return train(base, more); };
    auto one = with({"runtime.shadow.lane=workers", "runtime.shadow.threads=1"});
    auto two_slow = with({"runtime.shadow.lane=workers", "runtime.shadow.threads=2", "runtime.shadow.worker_delay_ms=30"});
    auto four = with({"runtime.shadow.lane=workers", "runtime.shadow.threads=4"});
    auto one_slow = with({"runtime.shadow.lane=workers", "runtime.shadow.threads=1", "runtime.shadow.worker_delay_ms=60"});
    EXPECT_TRUE(same_bits(one, two_slow)) << delay;
    EXPECT_TRUE(same_bits(one, four)) << delay;
    EXPECT_TRUE(same_bits(one, one_slow)) << delay;
    // Without workers: the jobs run in batches on the compute lane's threads, same bits.
    const std::vector<std::string> compute_lane = {"runtime.shadow.lane=compute", "runtime.threads=2"};
    auto compute = with(compute_lane);
    EXPECT_TRUE(same_bits(one, compute)) << delay;
    if (std::string(delay) == "runtime.shadow.delay=2") {
      // ... also where refreshes are split over two steps: some task starts after part 0.
      const Config cfg = config(base, compute_lane);
      std::string plan;
      for (int64_t step = 3; step <= 14; ++step) plan += describe_step_plan(cfg, step);
      const std::regex task("\\[parts ([0-9]+)-[0-9]+\\]");
      bool split = false;
      for (std::sregex_iterator it(plan.begin(), plan.end(), task), end; it != end; ++it) split |= (*it)[1] != "0";
      EXPECT_TRUE(split) << plan;
    }
    // The delay is real: published later than native, so the parameters differ from native's.
    auto native = train({"runtime.mode=native", "runtime.stagger=true"});
    EXPECT_FALSE(same_bits(one, native)) << delay;
  }
}

// On the compute lane one rank runs a step's root jobs in one batch at its end (nothing to
// overlap); several ranks run those of refreshes opened earlier beside the last gradient
// reductions (before clip_grads) and the rest at the end.
TEST_P(ShadowDeterminism, ComputeLaneBatchesFollowTheGradientReductions) {
  const std::vector<std::string> sets = {"runtime.mode=asteria", "runtime.stagger=true", "runtime.shadow.delay=2",
                                         "runtime.shadow.lane=compute", "runtime.threads=2"};
  const std::regex batch("root_jobs +- +block=([0-9])");
  for (int world : {1, 2}) {
    const Config cfg = config(sets, {"distributed.world_size=" + std::to_string(world)});
    std::map<std::string, int> kinds;
    for (int64_t step = 3; step <= 14; ++step) {
      const std::string plan = describe_step_plan(cfg, step);
      const size_t clip = plan.find("clip_grads");
      ASSERT_NE(clip, std::string::npos) << plan;
      for (std::sregex_iterator it(plan.begin(), plan.end(), batch), end; it != end; ++it) {
        ++kinds[(*it)[1]];
        const bool before_clip = static_cast<size_t>(it->position()) < clip;
        EXPECT_EQ(before_clip, (*it)[1] == "0") << world << " rank(s), step " << step << "\n" << plan;
      }
    }
    if (world == 1) {
      EXPECT_EQ(kinds, (std::map<std::string, int>{{"2", kinds["2"]}}));
      EXPECT_GT(kinds["2"], 0);
    } else {
      EXPECT_EQ(kinds.count("2"), 0u);
      EXPECT_GT(kinds["0"], 0);
    }
  }
}

// runtime.shadow.sync_steps: refreshes opened up to that step publish at once (D = 0), later
// ones D steps later.
TEST_P(ShadowDeterminism, SyncWarmupIsNativeThenDelayed) {
  // Sync over the whole run: every refresh is synchronous, so the run is native's.
  auto native = train({"runtime.mode=native"});
  auto all_sync = train({"runtime.mode=asteria", "runtime.stagger=false", "runtime.shadow.delay=2", "runtime.shadow.sync_steps=14"});
  EXPECT_TRUE(same_bits(native, all_sync));
  // Sync over part of the run: still independent of the workers and their speed, and neither
  // native nor the run without warm-up (refreshes at steps 2..14 with F = 3 fall on both sides).
  std::vector<std::string> part = {"runtime.mode=asteria", "runtime.stagger=true", "runtime.shadow.delay=2",
                                   "runtime.shadow.sync_steps=7"};
  auto with = [&](const std::vector<std::string>& more) { return train(part, more); };
  auto one = with({"runtime.shadow.lane=workers", "runtime.shadow.threads=1"});
  auto two_slow = with({"runtime.shadow.lane=workers", "runtime.shadow.threads=2", "runtime.shadow.worker_delay_ms=30"});
  EXPECT_TRUE(same_bits(one, two_slow));
  auto no_warmup = with({"runtime.shadow.lane=workers", "runtime.shadow.threads=1", "runtime.shadow.sync_steps=0"});
  EXPECT_FALSE(same_bits(one, no_warmup));
  auto native_stagger = train({"runtime.mode=native", "runtime.stagger=true"});
  EXPECT_FALSE(same_bits(one, native_stagger));
}

// The shadow metrics of every step, and on the compute lane the time of its root jobs.
TEST_P(ShadowDeterminism, MetricsReportTheShadowPipeline) {
  train({"runtime.mode=asteria", "runtime.stagger=true", "runtime.shadow.delay=2", "runtime.shadow.lane=compute"});
  std::ifstream in(dir_->file("run/metrics.jsonl"));
  std::string line;
  double root_jobs_s = 0;
  int64_t published = 0, steps = 0;
  while (std::getline(in, line)) {
    const auto j = nlohmann::json::parse(line);
    for (const char* k : {"shadow_stall_s", "shadow_in_flight", "shadow_published", "staging_s", "root_jobs_s"})
      ASSERT_TRUE(j.contains(k)) << k << " at step " << j["step"];
    root_jobs_s += j["root_jobs_s"].get<double>();
    published = j["shadow_published"].get<int64_t>();
    ++steps;
  }
  EXPECT_EQ(steps, 14);
  EXPECT_GT(root_jobs_s, 0);
  EXPECT_GT(published, 0);
}

// runtime.shadow.resident_jobs: the refreshes in flight parked on the disk tier while they wait
// give the same bits as all of them in memory, on the compute lane (the lane here by default)
// and on workers; the metrics count the traffic, and the store's file is gone after the run.
TEST_P(ShadowDeterminism, JobsParkedOnTheDiskGiveTheSameBits) {
  const std::vector<std::string> base = {"runtime.mode=asteria", "runtime.stagger=true", "runtime.shadow.delay=2"};
  const std::vector<std::vector<std::string>> lanes = {{}, {"runtime.shadow.lane=workers", "runtime.shadow.threads=2"}};
  for (const std::vector<std::string>& lane : lanes) {
    const auto all = train(base, lane);
    for (const char* jobs : {"runtime.shadow.resident_jobs=1", "runtime.shadow.resident_jobs=3"}) {
      std::vector<std::string> more = lane;
      more.push_back(jobs);
      EXPECT_TRUE(same_bits(all, train(base, more))) << jobs << (lane.empty() ? "" : " on workers");
      std::ifstream in(dir_->file("run/metrics.jsonl"));
      std::string line;
      double written = 0, read = 0, in_memory = 0;
      while (std::getline(in, line)) {
        const auto j = nlohmann::json::parse(line);
        ASSERT_TRUE(j.contains("shadow_park_write_bytes")) << line;
        written += j["shadow_park_write_bytes"].get<double>();
        read += j["shadow_park_read_bytes"].get<double>();
        in_memory = std::max(in_memory, j["shadow_jobs_in_memory"].get<double>());
      }
      if (std::string(jobs) == "runtime.shadow.resident_jobs=1") {
        EXPECT_GT(written, 0) << "nothing was parked";
        EXPECT_GT(read, 0);
      }
      EXPECT_LE(read, written);
      EXPECT_LE(in_memory, 3);   // 3, or 1 and the jobs held at once (a thread's each, a snapshot)
      for (const auto& f : std::filesystem::directory_iterator(dir_->file("run/tiers")))
        EXPECT_EQ(f.path().string().find("shadow-jobs"), std::string::npos) << f.path();
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Optimizers, ShadowDeterminism, ::testing::Values("shampoo", "soap", "kl_shampoo"));
