// The tiered state manager in training: with a quarter of the optimizer state on the host and
// the rest on disk, parameters are bit-identical to an in-memory run, and no tier's budget is
// exceeded at any step. For Shampoo, SOAP and KL-Shampoo, native and asteria.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>

#include "model/model.hpp"
#include "optim/optimizer_factory.hpp"
#include "train/tier_config.hpp"
#include "trainer_runs.hpp"

using namespace asteria;
using asteria::testing::same_bits;
using asteria::testing::short_second_order_sets;
using asteria::testing::TempDir;
using asteria::testing::train_params;

namespace {

class Tiers : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    dir_ = std::make_unique<TempDir>(std::string("tiers-") + GetParam());
    asteria::testing::write_bigram_tokens(dir_->file("train.bin"), 20000, 512, 3);
  }

  Config config(std::vector<std::string> extra) const {
    std::vector<std::string> sets = short_second_order_sets(*dir_, GetParam(), 10);
    sets.insert(sets.end(), extra.begin(), extra.end());
    return load_config_text("seed: 9\nmodel:\n  preset: tiny\n  n_layers: 2\n", "tiers.yaml", sets);
  }

  std::vector<nlohmann::json> metrics() const {
    std::vector<nlohmann::json> recs;
    std::ifstream in(dir_->file("run") + "/metrics.jsonl");
    for (std::string line; std::getline(in, line);) recs.push_back(nlohmann::json::parse(line));
    return recs;
  }

  std::unique_ptr<TempDir> dir_;
};

}  // namespace

TEST_P(Tiers, QuarterOnTheHostRestOnDiskIsBitIdenticalAndWithinBudget) {
  size_t total = 0, device = 0;
  const std::vector<std::string> tiers = asteria::testing::quarter_host_rest_disk(config({}), &total, &device);
  const size_t host = total / 4;
  const TierLayout layout = configured_tier_layout(config(tiers));
  ASSERT_GT(layout.host_bytes, 0u);
  ASSERT_LE(layout.host_bytes, host);
  ASSERT_GT(layout.disk_bytes, 0u);
  ASSERT_LT(layout.device_home_bytes + layout.host_bytes, total / 2);   // most of it lives on disk

  for (std::vector<std::string> mode : {std::vector<std::string>{"runtime.mode=native"},
                                        std::vector<std::string>{"runtime.mode=asteria", "runtime.stagger=true",
                                                                 "runtime.shadow.delay=1", "runtime.shadow.lane=workers",
                                                                 "runtime.shadow.threads=2"}}) {
    SCOPED_TRACE(mode[0]);
    const std::vector<float> reference = train_params(config(mode));
    for (const nlohmann::json& r : metrics()) {
      EXPECT_EQ(r["tier_bytes"]["disk"].get<size_t>(), 0u);
      EXPECT_EQ(r["tier_moved_bytes"]["disk_to_device"].get<size_t>(), 0u);
    }
    std::vector<std::string> sets = mode;
    sets.insert(sets.end(), tiers.begin(), tiers.end());
    const std::vector<float> tiered = train_params(config(sets));
    EXPECT_TRUE(same_bits(reference, tiered));
    // Every step: within every budget, and state really went to disk and came back.
    const std::vector<nlohmann::json> recs = metrics();
    ASSERT_EQ(recs.size(), 10u);
    size_t to_disk = 0, from_disk = 0, from_host = 0;
    for (const nlohmann::json& r : recs) {
      EXPECT_LE(r["tier_device_peak_bytes"].get<size_t>(), device) << "step " << r["step"];
      EXPECT_LE(r["tier_bytes"]["device"].get<size_t>(), device);
      EXPECT_LE(r["tier_bytes"]["host"].get<size_t>(), host);
      EXPECT_EQ(r["tier_bytes"]["disk"].get<size_t>(), layout.disk_bytes);
      EXPECT_GE(r["tier_stall_s"].get<double>(), 0.0);
      to_disk += r["tier_moved_bytes"]["device_to_disk"].get<size_t>();
      from_disk += r["tier_moved_bytes"]["disk_to_device"].get<size_t>();
      from_host += r["tier_moved_bytes"]["host_to_device"].get<size_t>();
    }
    EXPECT_GT(to_disk, 0u);
    EXPECT_GT(from_disk, 0u);
    EXPECT_GT(from_host, 0u);
  }
}

TEST_P(Tiers, PrefetchDistanceDoesNotChangeTheResult) {
  // Four blocks, so that the layers in flight are fewer than all of them.
  const TierLayout in_memory = configured_tier_layout(config({"model.n_layers=4"}));
  std::vector<size_t> per_layer;
  size_t total = 0;
  for (const auto& ids : in_memory.by_layer) {
    per_layer.push_back(0);
    for (int id : ids) per_layer.back() += in_memory.states[id].slot;
    total += per_layer.back();
  }
  const int L = static_cast<int>(per_layer.size());
  const std::vector<float> reference = train_params(config({"model.n_layers=4"}));
  for (int distance : {1, 2}) {
    // Device: the distance + 1 layers in flight and an eighth more (room for the cache's
    // fragmentation); host: an eighth of the state; the rest on disk.
    size_t device = 0;
    for (int start = 0; start < L; ++start) {
      size_t window = 0;
      for (int k = 0; k <= distance; ++k) window += per_layer[(start + k) % L];
      device = std::max(device, window + window / 8);
    }
    ASSERT_LT(device, total);
    const std::vector<float> tiered =
        train_params(config({"model.n_layers=4", "runtime.tiers.device.bytes=" + std::to_string(device),
                      "runtime.tiers.host.bytes=" + std::to_string(total / 8),
                      "runtime.tiers.prefetch_distance=" + std::to_string(distance)}));
    EXPECT_TRUE(same_bits(reference, tiered)) << "distance " << distance;
    size_t moved = 0;
    for (const nlohmann::json& r : metrics()) {
      EXPECT_LE(r["tier_device_peak_bytes"].get<size_t>(), device);
      moved += r["tier_moved_bytes"]["disk_to_device"].get<size_t>();
    }
    EXPECT_GT(moved, 0u) << "distance " << distance;
  }
}

// A device budget below the whole layers in flight: the tiers move each layer's state in parts
// (its layer-wide states with a run of its blocks; runtime/tier_layout.hpp) and the optimizer
// steps one part at a time, snapshots per part in asteria mode, with the same bits as in memory.
// Blocks of at most 64 rows or columns cut the tiny model's layers into 8 to 16 blocks.
TEST_P(Tiers, LayersMovedInPartsAreBitIdenticalAndWithinBudget) {
  if (std::string(GetParam()) == "muon") GTEST_SKIP() << "Muon has no blocks: its layers move whole";
  const std::vector<std::string> blocks = {"optim.max_preconditioner_dim=64", "runtime.tiers.prefetch_distance=1"};
  const Config in_memory_cfg = config(blocks);
  const TierLayout in_memory = configured_tier_layout(in_memory_cfg);
  size_t total = 0;
  for (const TierState& s : in_memory.states) total += s.slot;
  const auto specs = optimizer_state_specs(in_memory_cfg.optim, model_param_tables(in_memory_cfg.model));
  const int least = tier_options(in_memory_cfg).min_blocks_per_part;
  const size_t whole = tier_cache_need(specs, 1), finest = tier_cache_need(specs, 1, least);
  ASSERT_LT(2 * finest, whole);   // parts make the cache far smaller
  // Room for the finest parts and an eighth more (fragmentation), well below whole layers.
  const size_t device = finest + finest / 8;
  std::vector<std::string> tiers = blocks;
  tiers.insert(tiers.end(), {"runtime.tiers.device.bytes=" + std::to_string(device),
                             "runtime.tiers.host.bytes=" + std::to_string(total / 8)});
  const TierLayout layout = configured_tier_layout(config(tiers), TierCheck::Planned);
  EXPECT_GT(layout.blocks_per_part, 0);
  EXPECT_GT(layout.num_units(), layout.num_layers());
  for (std::vector<std::string> mode : {std::vector<std::string>{"runtime.mode=native"},
                                        std::vector<std::string>{"runtime.mode=asteria", "runtime.stagger=true",
                                                                 "runtime.shadow.delay=1", "runtime.shadow.lane=workers",
                                                                 "runtime.shadow.threads=2"}}) {
    SCOPED_TRACE(mode[0]);
    std::vector<std::string> sets = blocks;
    sets.insert(sets.end(), mode.begin(), mode.end());
    const std::vector<float> reference = train_params(config(sets));
    sets.insert(sets.end(), tiers.begin(), tiers.end());
    const std::vector<float> tiered = train_params(config(sets));
    EXPECT_TRUE(same_bits(reference, tiered));
    size_t from_disk = 0;
    for (const nlohmann::json& r : metrics()) {
      EXPECT_LE(r["tier_device_peak_bytes"].get<size_t>(), device) << "step " << r["step"];
      from_disk += r["tier_moved_bytes"]["disk_to_device"].get<size_t>();
    }
    EXPECT_GT(from_disk, 0u);
  }
}

INSTANTIATE_TEST_SUITE_P(Optimizers, Tiers, ::testing::Values("shampoo", "soap", "kl_shampoo", "muon"));

TEST(TiersConfig, StateTooLargeForEveryTierIsRefusedAtStartupWithTheBytesNeeded) {
  TempDir dir("tiers-refused");
  asteria::testing::write_bigram_tokens(dir.file("train.bin"), 5000, 512, 3);
  const std::string base = "seed: 1\nmodel:\n  preset: tiny\noptim:\n  name: soap\n";
  const std::vector<std::string> sets = {"data.train=" + dir.file("train.bin"), "run.dir=" + dir.file("run")};
  const TierLayout in_memory = configured_tier_layout(load_config_text(base, "tiny.yaml", sets));
  size_t total = 0;
  for (const TierState& s : in_memory.states) total += s.slot;
  std::vector<std::string> tight = sets;
  for (std::string s : {std::string("runtime.tiers.prefetch_distance=0"), "runtime.tiers.device.bytes=" + std::to_string(total / 2),
                        "runtime.tiers.host.bytes=" + std::to_string(total / 8), std::string("runtime.tiers.disk.bytes=4096")})
    tight.push_back(s);
  try {
    Trainer t(load_config_text(base, "tiny.yaml", tight));
    FAIL() << "the trainer started with state that fits no tier";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("tiny.yaml"), std::string::npos) << m;
    EXPECT_NE(m.find("does not fit the tier budgets"), std::string::npos) << m;
    EXPECT_NE(m.find("runtime.tiers.disk.bytes to at least"), std::string::npos) << m;
    EXPECT_NE(m.find("runtime.tiers.host.bytes to at least"), std::string::npos) << m;
  }
  EXPECT_FALSE(std::filesystem::exists(dir.file("run") + "/metrics.jsonl"));
}
