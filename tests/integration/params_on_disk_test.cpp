// Parameters on the disk tier (runtime.tiers.params.home disk) in real runs: the same bits as the
// run with them in memory (SOAP in asteria mode with two micro-batches, AdamW, at prefetch
// distance 0 and the default), across a resume from one home to the other, and chosen by
// runtime.placement auto as its last step under a limit where nothing else fits (a small model with
// a proportionally small limit: what the 10 GiB cgroup is to OLMo-1B), which then trains within it.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "core/memory_limits.hpp"
#include "train/estimates/memory_estimate.hpp"
#include "train/estimates/placement.hpp"
#include "trainer_runs.hpp"
#include "../train/estimates/tier_floor.hpp"

using namespace asteria;
using namespace asteria::testing;

namespace {

struct ParamsOnDisk : ::testing::Test {
  TempDir dir{"params-on-disk"};
  void SetUp() override { write_bigram_tokens(dir.file("train.bin"), 20000, 512, 3); }
  Config config(const std::string& optimizer, std::vector<std::string> extra,
                const std::string& model = "  preset: tiny\n  n_layers: 4\n") const {
    std::vector<std::string> sets = short_second_order_sets(dir, optimizer, 6);
    sets.insert(sets.end(), extra.begin(), extra.end());
    return load_config_text("seed: 9\nmodel:\n" + model, "params.yaml", sets);
  }
  nlohmann::json last_metrics() const {
    std::ifstream in(dir.file("run") + "/metrics.jsonl");
    std::string line, last;
    while (std::getline(in, line)) last = line;
    return nlohmann::json::parse(last);
  }
};

}  // namespace

TEST_F(ParamsOnDisk, TrainsToTheSameBitsAsInMemory) {
  for (const char* optimizer : {"soap", "adamw"}) {
    SCOPED_TRACE(optimizer);
    const std::vector<std::string> sets = {"runtime.placement=manual", "train.grad_accum=2",
                                           std::string("runtime.mode=") + (optimizer == std::string("soap") ? "asteria" : "native")};
    const std::vector<float> in_memory = train_params(config(optimizer, sets));
    for (const char* distance : {"0", "1"}) {
      SCOPED_TRACE(distance);
      std::vector<std::string> disk = sets;
      disk.push_back("runtime.tiers.params.home=disk");
      disk.push_back(std::string("runtime.tiers.params.prefetch_distance=") + distance);
      EXPECT_TRUE(same_bits(in_memory, train_params(config(optimizer, disk))));
      // Each step writes every block once (after its optimizer step), and reads it for its uses.
      const nlohmann::json m = last_metrics();
      size_t block_bytes = 0;
      for (int l = 1; l <= 4; ++l) block_bytes += model_param_tables(config(optimizer, sets).model)[l].numel * sizeof(float);
      EXPECT_EQ(m["params_disk_bytes"]["written"].get<size_t>(), block_bytes) << m.dump();
      EXPECT_GE(m["params_disk_bytes"]["read"].get<size_t>(), block_bytes) << m.dump();
      EXPECT_GE(m["params_stall_s"].get<double>(), 0) << m.dump();
      // The parameters' file goes with its run (its directory, the disk tier's, may stay).
      if (std::filesystem::exists(dir.file("run") + "/tiers"))
        EXPECT_TRUE(std::filesystem::is_empty(dir.file("run") + "/tiers"));
    }
  }
}

TEST_F(ParamsOnDisk, ResumesFromOneHomeToTheOtherWithTheSameBits) {
  const std::vector<std::string> base = {"runtime.placement=manual", "runtime.mode=asteria", "train.steps=8",
                                         "checkpoint.every=4"};
  const std::vector<float> straight = train_params(config("soap", base));
  for (const char* first : {"memory", "disk"}) {
    const std::string second = first == std::string("memory") ? "disk" : "memory";
    SCOPED_TRACE(std::string(first) + " -> " + second);
    std::vector<std::string> a = base, b = base;
    a.push_back(std::string("runtime.tiers.params.home=") + first);
    a.push_back("train.stop_after=4");
    train_params(config("soap", a));
    b.push_back("runtime.tiers.params.home=" + second);
    b.push_back("checkpoint.resume=latest");
    EXPECT_TRUE(same_bits(straight, train_params(config("soap", b))));
  }
}

TEST_F(ParamsOnDisk, PlacementPutsThemOnDiskWhereNothingElseFitsAndTheRunStaysWithin) {
  // OLMo-1B in small: its parameters and gradients are most of what a step holds (wide layers,
  // short sequences), and SOAP's blocks are small enough to refresh quickly.
  const std::string model = "  preset: tiny\n  d_model: 512\n  n_heads: 8\n  mlp_hidden: 2048\n  n_layers: 6\n  seq_len: 32\n";
  const std::vector<std::string> sets = {"runtime.mode=asteria", "optim.max_preconditioner_dim=256"};
  const Config cfg = config("soap", sets, model);
  // The largest limit whose placement ends with the parameters on the disk tier.
  const double all = process_memory(cfg).total();
  uint64_t limit = 0;
  Placement placed;
  for (double f = 1.0; f > 0.01 && limit == 0; f *= 0.97) {
    const uint64_t l = static_cast<uint64_t>(f * all);
    try {
      placed = choose_placement(cfg, one_process_inputs(l));
      if (placed.cfg.runtime.tiers.params.home == ParamsHome::Disk) limit = l;
    } catch (const Error&) {
      break;   // nothing fits any more
    }
  }
  ASSERT_GT(limit, 0u) << "no limit puts the parameters on the disk tier";
  ASSERT_EQ(placed.parts.back().key, "runtime.tiers.params.home") << placed.describe();
  // Everything else was tried first: the optimizer state on disk, recompute, the head in chunks,
  // the smallest micro-batch.
  EXPECT_EQ(placed.cfg.train.micro_batch, 1) << placed.describe();
  // Without the parameters' step the same limit is refused.
  Config given = cfg;
  given.given.insert("runtime.tiers.params.home");
  EXPECT_THROW(choose_placement(given, one_process_inputs(limit)), Error);

  std::vector<std::string> limited = sets;
  limited.push_back("runtime.memory_limit=" + std::to_string(limit));
  const Config run = config("soap", limited, model);
  const uint64_t before = find_memory_limits().resident;   // the test binary's own pages
  ASSERT_GT(before, 0u);
  Trainer t(run);
  const TrainResult r = t.run();
  EXPECT_TRUE(std::isfinite(r.final_loss));
  std::ifstream in(dir.file("run") + "/run_info.json");
  const nlohmann::json info = nlohmann::json::parse(in)["placement"];
  EXPECT_EQ(info["parts"].back()["key"], "runtime.tiers.params.home") << info.dump();
  EXPECT_LE(info["need_bytes"].get<double>(), kPlacementFill * static_cast<double>(limit));
  // What the run added to the process at its peak stays within the limit (runtime.memory_limit
  // is the run's budget beside what the process held before).
  const nlohmann::json m = last_metrics();
  const double added = m["peak_rss_bytes"][0].get<double>() - static_cast<double>(before);
  EXPECT_LE(added, static_cast<double>(limit)) << m.dump();
  std::printf("limit %.1f MiB, the run's peak %.1f MiB\n", limit / 1048576.0, added / 1048576.0);
  EXPECT_GT(m["params_disk_bytes"]["written"].get<size_t>(), 0u) << m.dump();
}

TEST(ParamsOnDiskLaunch, RefusedOnCudaAndWithSeveralRanksNamingTheKey) {
  Config cfg = load_config_text("model:\n  preset: tiny\n", "p.yaml", {"runtime.tiers.params.home=disk"});
  EXPECT_NO_THROW(check_params_home(cfg, 1));
  try {
    check_params_home(cfg, 2);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("runtime.tiers.params.home"), std::string::npos) << e.what();
  }
  cfg.runtime.backend = BackendKind::Cuda;
  EXPECT_THROW(check_params_home(cfg, 1), Error);
}
