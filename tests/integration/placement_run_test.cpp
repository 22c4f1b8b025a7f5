// runtime.placement auto in real runs: a memory limit that makes the placement put optimizer
// state on the disk tier, and then also recompute activations and chunk the LM head, trains to
// the same bits as the run with everything in memory (those choices never change the math), and
// the choice is in run_info.json with its reasons.
#include <gtest/gtest.h>

#include <fstream>
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
// to the least the tiers alone reach (0: all in memory; 1: the tiers' least; more: further steps).
uint64_t limit_for(const Config& c, double fraction) {
  const double all = process_memory(c).total();
  return static_cast<uint64_t>((all - fraction * (all - asteria::testing::least_with_tiers(c))) / kPlacementFill);
}

}  // namespace

TEST_F(PlacedRun, TiersThenRecomputeTrainToTheSameBitsAndSaySo) {
  const std::vector<float> in_memory = train_params(config({"runtime.placement=manual"}));
  EXPECT_TRUE(run_info()["placement"]["parts"].empty());
  for (double fraction : {0.5, 1.3}) {
    SCOPED_TRACE(fraction);
    const uint64_t limit = limit_for(config({}), fraction);
    const Config cfg = config({"runtime.memory_limit=" + std::to_string(limit)});
    const Placement expected = choose_placement(cfg, {limit, "", [](const Config& c, TierCheck t) { return process_memory(c, t); }, {}});
    ASSERT_FALSE(expected.parts.empty());
    EXPECT_EQ(expected.parts[0].key, "runtime.tiers");
    EXPECT_FALSE(expected.changes_math) << expected.describe();
    if (fraction > 1) EXPECT_GT(expected.parts.size(), 1u) << expected.describe();
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
