// runtime.placement auto in real runs: a memory limit that makes the placement put optimizer
// state on the disk tier, and then also recompute activations and chunk the LM head, trains to
// the same bits as the run with everything in memory (those choices never change the math), and
// the choice is in run_info.json with its reasons. Memory taken by another process during the run
// (an injected limit that falls, then comes back) moves optimizer state to the disk tier and back
// at step boundaries, with the same bits.
#include <gtest/gtest.h>

#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>

#include "train/estimates/placement.hpp"
#include "trainer_runs.hpp"
#include "../train/estimates/tier_floor.hpp"

using namespace asteria;
using asteria::testing::same_bits;
using asteria::testing::short_second_order_sets;
using asteria::testing::TempDir;
using asteria::testing::train_params;

namespace {

struct PlacedRun : ::testing::Test {
  TempDir dir{"placement-run"};
  void SetUp() override { asteria::testing::write_bigram_tokens(dir.file("train.bin"), 20000, 512, 3); }
  Config config(std::vector<std::string> extra) const {
    std::vector<std::string> sets = short_second_order_sets(dir, "soap", 6);
    sets.insert(sets.end(), extra.begin(), extra.end());
    return load_config_text("seed: 9\nmodel:\n  preset: tiny\n  n_layers: 6\n", "placed.yaml", sets);
  }
  nlohmann::json run_info() const {
    std::ifstream in(dir.file("run") + "/run_info.json");
    return nlohmann::json::parse(in);
  }
};

// The limit at which the placement needs `fraction` of the way from everything in memory down
// to the least the tiers alone reach at prefetch distance 1 (0: all in memory; 1: that least; more:
// further steps).
uint64_t limit_for(const Config& c, double fraction) {
  const double all = process_memory(c).total();
  return static_cast<uint64_t>((all - fraction * (all - asteria::testing::least_with_tiers(c, 1))) / kPlacementFill);
}

// A memory limit that changes at step boundaries: the k-th reading (the startup's first, then one
// before each step after the first) gives limits[k]; the last repeats.
MemoryWatch scripted(std::vector<uint64_t> limits) {
  auto calls = std::make_shared<size_t>(0);
  return [limits, calls]() {
    const size_t k = std::min((*calls)++, limits.size() - 1);
    return MemoryReading{limits[k], "the test's reading " + std::to_string(k)};
  };
}

}  // namespace

TEST_F(PlacedRun, TiersThenRecomputeTrainToTheSameBitsAndSaySo) {
  const std::vector<float> in_memory = train_params(config({"runtime.placement=manual"}));
  EXPECT_TRUE(run_info()["placement"]["parts"].empty());
  for (double fraction : {0.5, 1.3}) {
    SCOPED_TRACE(fraction);
    const uint64_t limit = limit_for(config({}), fraction);
    const Config cfg = config({"runtime.memory_limit=" + std::to_string(limit)});
    const Placement expected = choose_placement(cfg, asteria::testing::one_process_inputs(limit));
    ASSERT_FALSE(expected.parts.empty());
    EXPECT_EQ(expected.parts[0].key, "runtime.tiers");
    EXPECT_FALSE(expected.changes_math) << expected.describe();
    if (fraction > 1) {
      EXPECT_GT(expected.parts.size(), 1u) << expected.describe();
    }
    EXPECT_TRUE(same_bits(in_memory, train_params(cfg))) << expected.describe();
    const nlohmann::json info = run_info()["placement"];
    EXPECT_EQ(info["limit_bytes"].get<uint64_t>(), limit);
    ASSERT_EQ(info["parts"].size(), expected.parts.size()) << info.dump();
    for (size_t i = 0; i < expected.parts.size(); ++i) {
      EXPECT_EQ(info["parts"][i]["key"], expected.parts[i].key);
      EXPECT_FALSE(info["parts"][i]["reason"].get<std::string>().empty());
    }
    EXPECT_LE(info["need_bytes"].get<double>(), kPlacementFill * static_cast<double>(limit));
  }
}

TEST_F(PlacedRun, MemoryTakenDuringTheRunMovesStateToDiskAndBackWithTheSameBits) {
  const std::vector<float> in_memory = train_params(config({"runtime.placement=manual"}));
  const Config cfg = config({});
  const uint64_t plenty = 4 * limit_for(cfg, 0);
  Config parked = cfg;
  parked.runtime.shadow.resident_jobs = least_resident_jobs(cfg);
  // 0.5: the tiers alone make room; 1.3: not even all optimizer state on disk would fit beside
  // the refreshes in flight, which are parked as well; "none": not even that fits (the run goes
  // on with the least the tiers reach, its jobs parked).
  const std::vector<std::pair<std::string, uint64_t>> cases = {
      {"0.5", limit_for(cfg, 0.5)},
      {"1.3", limit_for(cfg, 1.3)},
      {"none", static_cast<uint64_t>(0.5 * asteria::testing::least_with_tiers(parked))}};
  for (const auto& [name, pressed] : cases) {
    SCOPED_TRACE(name);
    // Readings: startup, before step 2, 3, 4, 5, 6: pressed before steps 3 and 4.
    const std::vector<float> params = train_params(cfg, scripted({plenty, plenty, pressed, pressed, plenty, plenty}));
    EXPECT_TRUE(same_bits(in_memory, params));
    const std::vector<nlohmann::json> lines = asteria::testing::metrics_lines(dir.file("run"));
    ASSERT_EQ(lines.size(), 6u);
    for (size_t i = 0; i < lines.size(); ++i) {
      SCOPED_TRACE(lines[i].dump());
      EXPECT_EQ(lines[i].contains("placement_replan_s"), i == 2 || (i == 4 && name != "1.3"));
      const bool jobs_parked = name != "0.5" && i >= 2;   // and they stay parked
      EXPECT_EQ(lines[i].contains("shadow_jobs_in_memory"), jobs_parked);
      if (name == "1.3") continue;   // the tiers as the placement finds (the jobs may be enough)
      EXPECT_EQ(lines[i]["placement_replans"].get<int>(), std::vector<int>({0, 0, 1, 1, 2, 2})[i]);
      EXPECT_EQ(lines[i]["tier_bytes"]["disk"].get<uint64_t>() > 0, i == 2 || i == 3);
    }
  }
}

// Memory taken where the tiers alone cannot make room: the shadow pipeline's refreshes in flight
// are parked on the disk tier from that step on (here all but the least, every job written while
// it waits and read back), with the same bits.
TEST_F(PlacedRun, MemoryTakenParksTheRefreshesInFlightWithTheSameBits) {
  const Config cfg = config({"train.warmup_steps=0", "runtime.shadow.delay=2", "runtime.stagger=true"});
  Config manual = cfg;
  manual.runtime.placement = PlacementMode::Manual;
  const std::vector<float> in_memory = train_params(manual);
  Config parked = cfg;
  parked.runtime.shadow.resident_jobs = least_resident_jobs(cfg);
  const double least_in_memory = asteria::testing::least_with_tiers(cfg), least_parked = asteria::testing::least_with_tiers(parked);
  ASSERT_LT(least_parked, least_in_memory);
  const uint64_t plenty = 4 * limit_for(cfg, 0);
  const auto pressed = static_cast<uint64_t>((least_parked + least_in_memory) / 2 / kPlacementFill);
  // Readings: startup, before step 2, 3, ...: pressed from step 3 on.
  const std::vector<float> params = train_params(cfg, scripted({plenty, plenty, pressed}));
  EXPECT_TRUE(same_bits(in_memory, params));
  const std::vector<nlohmann::json> lines = asteria::testing::metrics_lines(dir.file("run"));
  ASSERT_EQ(lines.size(), 6u);
  EXPECT_FALSE(lines[1].contains("shadow_jobs_in_memory")) << "no job store before the re-plan";
  double written = 0;
  for (size_t i = 2; i < lines.size(); ++i) {
    SCOPED_TRACE(lines[i].dump());
    EXPECT_EQ(lines[i]["placement_replans"].get<int>(), 1);
    ASSERT_TRUE(lines[i].contains("shadow_jobs_in_memory"));
    EXPECT_LE(lines[i]["shadow_jobs_in_memory"].get<int>(), least_resident_jobs(cfg));
    written += lines[i]["shadow_park_write_bytes"].get<double>();
  }
  EXPECT_GT(written, 0) << "no refresh was parked";
}
