// runtime.placement auto while a run goes on (train/placement_watch.hpp): the machine's limit of a
// running process counts what it holds itself; a re-placement is asked for only when the limit
// fell (or came back) past the hysteresis, changes only the tiers, and is counted.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <memory>

#include "config/config.hpp"
#include "train/placement_watch.hpp"
#include "../integration/test_util.hpp"
#include "estimates/tier_floor.hpp"

namespace asteria {
namespace {

constexpr uint64_t GiB = uint64_t{1} << 30;

void write(const asteria::testing::TempDir& dir, const std::string& rel, const std::string& text) {
  const std::filesystem::path p = dir.path() / rel;
  std::filesystem::create_directories(p.parent_path());
  std::ofstream(p) << text;
}

TEST(PlacementWatch, TheMachinesLimitOfARunningProcessCountsWhatItHolds) {
  asteria::testing::TempDir root("watch-root");
  write(root, "proc/meminfo", "MemAvailable:   10485760 kB\n");   // 10 GiB left to take
  write(root, "proc/self/status", "VmSize:  3145728 kB\nVmRSS:   2097152 kB\n");   // holds 2 GiB
  const MemoryReading alone = machine_memory_watch(1, {root.path().string(), UINT64_MAX})();
  EXPECT_EQ(alone.limit, 12 * GiB);
  EXPECT_NE(alone.source.find("MemAvailable"), std::string::npos) << alone.source;
  // Two ranks share what is left; each holds its own.
  EXPECT_EQ(machine_memory_watch(2, {root.path().string(), UINT64_MAX})().limit, 7 * GiB);
  // ulimit -v 4 GiB with 3 GiB of address space taken binds: 1 GiB more than the 3 it has.
  const MemoryReading as = machine_memory_watch(1, {root.path().string(), 4 * GiB})();
  EXPECT_EQ(as.limit, 4 * GiB);
  EXPECT_NE(as.source.find("RLIMIT_AS"), std::string::npos) << as.source;
}

Config small() {
  return load_config_text("model:\n  preset: tiny\n  n_layers: 6\n", "small.yaml",
                          {"optim.name=soap", "train.steps=20", "run.dir=/tmp/placement-watch-test"});
}

PlacementInputs inputs(uint64_t limit) { return asteria::testing::one_process_inputs(limit); }

TEST(PlacementWatch, ReplacesOnlyTheTiersAndOnlyPastTheHysteresis) {
  const Config cfg = small();
  const double all = process_memory(cfg).total();
  const auto start = static_cast<uint64_t>(4 * all);
  Placement running = choose_placement(cfg, inputs(start));
  ASSERT_TRUE(running.parts.empty()) << running.describe();
  // The readings in turn; the last repeats.
  // A quarter of the way from the least the tiers reach to all in memory.
  const double least = asteria::testing::least_with_tiers(cfg);
  const auto pressed = static_cast<uint64_t>((least + (all - least) / 4) / kPlacementFill);
  std::vector<uint64_t> readings = {static_cast<uint64_t>(0.97 * start), pressed, pressed, pressed + pressed / 20,
                                    static_cast<uint64_t>(1.12 * pressed), start};
  auto k = std::make_shared<size_t>(0);
  PlacementWatch watch(running, cfg.runtime.tiers, [readings, k]() {
    const size_t i = std::min((*k)++, readings.size() - 1);
    return MemoryReading{readings[i], "reading " + std::to_string(i)};
  }, 1, 1, running.limit);
  EXPECT_FALSE(watch.check(running)) << "3% below the start: within the hysteresis";
  std::optional<Placement> down = watch.check(running);
  ASSERT_TRUE(down) << "pressed: the run no longer fits";
  EXPECT_TRUE(down->fits);
  EXPECT_EQ(down->limit, pressed);
  EXPECT_LE(down->need.total(), kPlacementFill * pressed);
  ASSERT_FALSE(down->parts.empty());
  EXPECT_EQ(down->parts[0].key, "runtime.tiers");
  // Nothing but the tiers changed.
  Config tiers_back = down->cfg;
  tiers_back.runtime.tiers = cfg.runtime.tiers;
  EXPECT_EQ(config_to_yaml(tiers_back), config_to_yaml(cfg));
  running = *down;
  EXPECT_FALSE(watch.check(running)) << "the same limit again";
  EXPECT_FALSE(watch.check(running)) << "5% more: within the hysteresis";
  // 12% more than planned: more state comes back into memory (or all of it).
  std::optional<Placement> up = watch.check(running);
  ASSERT_TRUE(up);
  EXPECT_LT(up->need.optimizer_on_disk, running.need.optimizer_on_disk);
  running = *up;
  std::optional<Placement> all_back = watch.check(running);
  ASSERT_TRUE(all_back);
  EXPECT_TRUE(all_back->parts.empty()) << all_back->describe();
  EXPECT_EQ(all_back->cfg.runtime.tiers.device.bytes, cfg.runtime.tiers.device.bytes);
  running = *all_back;
  EXPECT_FALSE(watch.check(running)) << "the config's own tiers: nothing more to bring back";
}

// Where the tiers alone cannot make room, the shadow pipeline's refreshes in flight are parked
// on the disk tier as well (the same bits); they stay parked when the memory comes back.
TEST(PlacementWatch, RefreshesInFlightAreParkedWhenTheTiersAreNotEnough) {
  const Config cfg = load_config_text("model:\n  preset: tiny\n  n_layers: 6\n", "small.yaml",
                                      {"optim.name=soap", "train.steps=20", "train.warmup_steps=0",
                                       "run.dir=/tmp/placement-watch-test"});
  ASSERT_EQ(cfg.runtime.mode, RuntimeMode::Asteria);
  const double all = process_memory(cfg).total();
  const uint64_t start = static_cast<uint64_t>(4 * all);
  Placement running = choose_placement(cfg, inputs(start));
  ASSERT_EQ(running.cfg.runtime.shadow.resident_jobs, 0) << running.describe();
  Config parked = cfg;
  parked.runtime.shadow.resident_jobs = least_resident_jobs(cfg);
  const double least_in_memory = asteria::testing::least_with_tiers(cfg), least_parked = asteria::testing::least_with_tiers(parked);
  ASSERT_LT(least_parked, least_in_memory);
  const auto pressed = static_cast<uint64_t>((least_parked + least_in_memory) / 2 / kPlacementFill);
  std::vector<uint64_t> readings = {pressed, start};
  auto k = std::make_shared<size_t>(0);
  PlacementWatch watch(running, cfg.runtime.tiers, [readings, k]() {
    return MemoryReading{readings[std::min((*k)++, readings.size() - 1)], "reading"};
  }, 1, 1, running.limit);
  std::optional<Placement> down = watch.check(running);
  ASSERT_TRUE(down);
  EXPECT_TRUE(down->fits) << down->describe();
  EXPECT_EQ(down->cfg.runtime.shadow.resident_jobs, least_resident_jobs(cfg));
  EXPECT_LE(down->need.total(), kPlacementFill * static_cast<double>(pressed));
  EXPECT_GT(down->need.jobs_on_disk, 0);
  EXPECT_EQ(down->parts.back().key, "runtime.shadow.resident_jobs") << down->describe();
  EXPECT_FALSE(down->changes_math);
  running = *down;
  // The memory back: the tiers come back to the config's own (if they moved), the jobs stay parked.
  if (std::optional<Placement> up = watch.check(running)) {
    EXPECT_EQ(up->cfg.runtime.tiers.device.bytes, cfg.runtime.tiers.device.bytes);
    EXPECT_EQ(up->cfg.runtime.shadow.resident_jobs, least_resident_jobs(cfg));
  }
}

// A run placed with its tiers at startup whose limit then reads a hair above the startup's (the
// noise of MemAvailable, no dip before it) is not placed again.
TEST(PlacementWatch, NoiseAboveTheStartupsLimitIsNoReason) {
  const Config cfg = small();
  const double least = asteria::testing::least_with_tiers(cfg), all = process_memory(cfg).total();
  const auto start = static_cast<uint64_t>((least + all) / 2 / kPlacementFill);
  const Placement running = choose_placement(cfg, inputs(start));
  ASSERT_EQ(running.parts.at(0).key, "runtime.tiers") << running.describe();
  for (double above : {1.001, 1.05}) {
    PlacementWatch watch(running, cfg.runtime.tiers, [&]() {
      return MemoryReading{static_cast<uint64_t>(above * static_cast<double>(start)), "reading"};
    }, 1, 1, running.limit);
    EXPECT_FALSE(watch.check(running)) << above;
  }
}

TEST(PlacementWatch, WhatTheProcessHoldsCorrectsTheEstimate) {
  const Config cfg = small();
  const double all = process_memory(cfg).total();
  const auto start = static_cast<uint64_t>(4 * all);
  const Placement running = choose_placement(cfg, inputs(start));
  // The estimate fits 93% of this limit (not pressed), but the process holds 5% more.
  const auto limit = static_cast<uint64_t>(all / 0.93);
  for (double held : {0.0, 1.05}) {
    SCOPED_TRACE(held);
    PlacementWatch watch(running, cfg.runtime.tiers, [&]() {
      return MemoryReading{limit, "reading", static_cast<uint64_t>(held * all)};
    }, 1, 1, running.limit);
    std::optional<Placement> next = watch.check(running);
    if (held == 0) {
      EXPECT_FALSE(next) << "the estimate alone fits";
      continue;
    }
    ASSERT_TRUE(next);
    // Planned against the limit scaled by the estimate's error: the estimate fills 90% of it.
    EXPECT_LE(next->limit, static_cast<uint64_t>(limit / 1.05) + 1);
    EXPECT_TRUE(next->fits);
    EXPECT_LE(next->need.total(), kPlacementFill * static_cast<double>(next->limit));
    EXPECT_GT(next->need.optimizer_on_disk, 0);
  }
}

}  // namespace
}  // namespace asteria
