// runtime.placement auto under real mpirun: memory taken from the ranks during a run (an injected
// reading that falls before steps 3 and 4, then comes back) moves each pressed rank's optimizer
// state to the disk tier and back at step boundaries, on its own (no collective: the tiers are
// the rank's own), and every rank's parameters end bit-identical to the run with everything in
// memory; sharded (fsdp full) at every world size, replicated (none) at 1 and 2 ranks. Pressed:
// every rank (another job on every node), and the last rank only (one node).
#include <gtest/gtest.h>

#include <array>
#include <cstring>
#include <memory>
#include <optional>

#include "comm/mpi_communicator.hpp"
#include "../integration/trainer_runs.hpp"

using namespace asteria;
using asteria::testing::same_bits;
using asteria::testing::train_params;

namespace {

constexpr uint64_t kPlenty = uint64_t{1} << 40;   // 1 TiB: everything in memory
constexpr uint64_t kPressed = uint64_t{1} << 20;  // 1 MiB: as much state on disk as the tiers reach

// Readings: the startup's, then one before each step after the first; pressed before 3 and 4.
MemoryWatch scripted(bool pressed) {
  const std::array<uint64_t, 6> limits = {kPlenty, kPlenty, pressed ? kPressed : kPlenty, pressed ? kPressed : kPlenty,
                                          kPlenty, kPlenty};
  auto calls = std::make_shared<size_t>(0);
  return [limits, calls]() {
    const size_t k = std::min((*calls)++, limits.size() - 1);
    return MemoryReading{limits[k], "the test's reading " + std::to_string(k)};
  };
}

// One directory for all ranks: rank 0 makes it and writes the tokens, the others learn its name.
struct SharedDir {
  std::optional<asteria::testing::TempDir> dir;
  std::string path;
  Communicator& world;
  explicit SharedDir(Communicator& w) : world(w) {
    std::array<char, 512> name{};
    if (world.rank() == 0) {
      dir.emplace("mpi-placement");
      asteria::testing::write_bigram_tokens(dir->file("train.bin"), 20000, 512, 3);
      std::strncpy(name.data(), dir->path().c_str(), name.size() - 1);
    }
    Request r = world.broadcast(name.data(), name.size(), 0, "the test's directory");
    world.wait(r);
    path = name.data();
  }
  ~SharedDir() {   // every rank done with it before rank 0 removes it
    double one = 1;
    Request r = world.all_reduce(&one, 1, "the test's end");
    world.wait(r);
  }
};

}  // namespace

TEST(MpiPlacement, PressedRanksMoveTheirStateToDiskAndBackWithEveryRanksBits) {
  auto world = make_mpi_world_communicator();
  world->set_timeout(120);
  const int W = world->size(), me = world->rank();
  SharedDir shared(*world);
  asteria::testing::TempDir unused("mpi-placement-sets");   // short_second_order_sets wants one; its paths are replaced
  for (const char* fsdp : {"full", "none"}) {
    // Replicated, more ranks add nothing but time (3 and 4 ranks share 2 cores here).
    if (std::string(fsdp) == "none" && W > 2) continue;
    SCOPED_TRACE(std::string("distributed.fsdp ") + fsdp);
    auto config = [&](const std::string& placement) {
      std::vector<std::string> sets = asteria::testing::short_second_order_sets(unused, "soap", 6);
      sets.insert(sets.end(), {"data.train=" + shared.path + "/train.bin", "run.dir=" + shared.path + "/run",
                               std::string("distributed.fsdp=") + fsdp, "checkpoint.enabled=false",
                               "runtime.placement=" + placement});
      return load_config_text("seed: 9\nmodel:\n  preset: tiny\n  n_layers: 6\n", "placed.yaml", sets);
    };
    const std::vector<float> in_memory = train_params(config("manual"), {}, world.get());
    for (bool only_the_last : {false, true}) {
      SCOPED_TRACE(only_the_last ? "the last rank pressed" : "every rank pressed");
      const bool pressed = !only_the_last || me == W - 1;
      const std::vector<float> params = train_params(config("auto"), scripted(pressed), world.get());
      EXPECT_TRUE(same_bits(in_memory, params));
      if (me != 0) continue;   // rank 0 writes the metrics
      const std::vector<nlohmann::json> lines = asteria::testing::metrics_lines(shared.path + "/run");
      ASSERT_EQ(lines.size(), 6u);
      const int pressed_ranks = only_the_last ? 1 : W;
      const std::array<int, 6> replans = {0, 0, 1, 1, 2, 2};   // per pressed rank: down before 3, up before 5
      for (size_t i = 0; i < lines.size(); ++i) {
        SCOPED_TRACE(lines[i].dump());
        EXPECT_EQ(lines[i]["placement_replans"].get<int>(), pressed_ranks * replans[i]);
        // Replicated, rank 0 holds all the state and the least the tiers reach puts most of it on
        // disk; sharded over 4 ranks, its shard fits the cache of the layers in flight.
        if (std::string(fsdp) != "none") continue;
        const bool rank0_on_disk = (i == 2 || i == 3) && (!only_the_last || W == 1);
        EXPECT_EQ(lines[i]["tier_bytes"]["disk"].get<uint64_t>() > 0, rank0_on_disk);
      }
    }
  }
}
