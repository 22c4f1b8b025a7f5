// asteria-train under real mpirun (oversubscribed on 2 cores): the same global batch at W = 1, 2
// and 4 ranks (micro-batch 8 / W) gives per-step losses within 1e-5 relative of one rank's over
// 20 steps, for AdamW and SOAP (native and asteria; see the test for why SOAP starts from a
// checkpoint) and every distributed.fsdp mode: none (replicated), full (sharded over all ranks)
// and hybrid (sharded in nodes of 2 ranks, distributed.ranks_per_node, replicated across them).
// Every run checks each step that the ranks' parameters are bit-identical (the trainer fails
// the run otherwise). A replicated checkpoint written at 2 ranks resumes at 1 and at 4 on the
// same losses.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>

#include "core/hdf5_file.hpp"
#include "test_util.hpp"

using asteria::testing::run_command;
using asteria::testing::kConfigs;
using asteria::testing::kMpirun;
using asteria::testing::kTrain;
using asteria::testing::losses;
using asteria::testing::worst_relative;
using asteria::testing::TempDir;

namespace {

// Everything a checkpoint holds, whatever its world size: every tensor whole (a sharded run's
// row-blocks "<name>/rows_<a>_<b>", from all its rank files, put back in place), the block
// coordinates, and the values (train.elapsed_s left out: a clock).
std::map<std::string, std::vector<float>> checkpoint_contents(const std::string& dir) {
  std::map<std::string, std::vector<float>> out;
  const nlohmann::json manifest = nlohmann::json::parse(std::ifstream(dir + "/manifest.json"));
  for (int r = 0; r < manifest.at("world_size").get<int>(); ++r) {
    char name[32];
    std::snprintf(name, sizeof name, "/rank%05d.h5", r);
    asteria::Hdf5File f(dir + name, asteria::Hdf5File::Mode::Read);
    std::function<void(const std::string&)> walk = [&](const std::string& group) {
      for (const std::string& m : f.members(group)) {
        const std::string path = (group == "/" ? "" : group) + "/" + m;
        if (!f.is_dataset(path)) {
          walk(path);
          continue;
        }
        if (path == "/values/train.elapsed_s") continue;
        const std::vector<int64_t> shape = f.shape(path);
        size_t n = 1;
        for (int64_t d : shape) n *= static_cast<size_t>(d);
        long long a = 0, b = 0;
        if (std::sscanf(m.c_str(), "rows_%lld_%lld", &a, &b) == 2) {
          std::vector<float> rows(n);
          f.read(path, rows.data(), n);
          std::vector<float>& whole = out[group];
          const size_t cols = static_cast<size_t>(shape[1]);
          whole.resize(std::max(whole.size(), static_cast<size_t>(b) * cols));
          std::copy(rows.begin(), rows.end(), whole.begin() + static_cast<ptrdiff_t>(a * cols));
        } else if (path.rfind("/values/", 0) == 0 || m == "block") {
          std::vector<double> v(n);
          f.read(path, v.data(), n);
          out[path].assign(v.begin(), v.end());
        } else {
          std::vector<float>& v = out[path];
          v.resize(n);
          f.read(path, v.data(), n);
        }
      }
    };
    walk("/");
  }
  return out;
}

class MultiRank : public ::testing::Test {
 protected:
  void SetUp() override {
    asteria::testing::write_bigram_tokens(dir_.file("train.bin"), 40000, 512, 3);
  }
  // asteria-train at `ranks` ranks (1: no mpirun), micro-batch 8 / ranks.
  int train(const std::string& config, int ranks, const std::string& run, const std::string& extra, std::string* out) {
    const std::string launcher =
        ranks == 1 ? "" : kMpirun + "-np " + std::to_string(ranks) + " ";
    return run_command(launcher + kTrain + " --config " + kConfigs + "/" + config + " --set data.train=" +
                           dir_.file("train.bin") + " --set data.eval= --set train.warmup_steps=2 --set run.dir=" +
                           dir_.file(run) + " --set train.micro_batch=" + std::to_string(8 / ranks) +
                           " --set distributed.check_every=1 " + extra,
                       out);
  }
  TempDir dir_{"multi-rank"};
};

}  // namespace

TEST_F(MultiRank, TwoAndFourRanksMatchOneRankInEveryMode) {
  // AdamW from the first step. SOAP's first factors (one gradient: G G^T of rank <= the block's
  // short side) have null spaces whose eigenbasis is arbitrary, so a gradient summed in another
  // order (the batch split over ranks) picks another basis there, and the runs part by ~1e-3
  // within a few steps at any world size; SOAP is therefore compared from a checkpoint of one
  // rank at step 8, when its factors have full rank, continued to step 20 at 1, 2 and 4 ranks.
  struct Case {
    const char* config;
    const char* extra;
    int from;   // 0: from scratch; else resume the one-rank checkpoint of this step
  };
  // (The sharded runs write no checkpoints here: ShardedCheckpointsLoadAtOtherWorldSizes tests those.)
  const std::vector<std::string> modes = {
      "--set distributed.fsdp=none",
      "--set distributed.fsdp=full --set checkpoint.enabled=false",
      "--set distributed.fsdp=hybrid --set distributed.ranks_per_node=2 --set checkpoint.enabled=false"};
  for (const Case& c : {Case{"tiny-adamw.yaml", "", 0}, Case{"tiny-soap.yaml", "--set runtime.mode=native", 8},
                        Case{"tiny-soap.yaml", "--set runtime.mode=asteria --set runtime.shadow.delay=2", 8}}) {
    SCOPED_TRACE(std::string(c.config) + " " + c.extra);
    std::string out;
    const std::string base = " --set train.steps=20 --set optim.precondition_frequency=5 " + std::string(c.extra);
    if (c.from) ASSERT_EQ(0, train(c.config, 1, "start", base + " --set run.overwrite=true --set train.stop_after=8", &out)) << out;
    std::vector<double> one;
    for (int ranks : {1, 2, 4})
      for (const std::string& mode : modes) {
        if (ranks == 1 && mode != modes[0]) continue;
        SCOPED_TRACE(std::to_string(ranks) + " ranks, " + mode);
        const std::string run = "w" + std::to_string(ranks);
        std::filesystem::remove_all(dir_.file(run));
        std::string args = base + " --set run.overwrite=true " + mode;
        if (c.from) {
          std::filesystem::copy(dir_.file("start"), dir_.file(run), std::filesystem::copy_options::recursive);
          args = base + " --resume latest --set checkpoint.allow_changes=[train.micro_batch] " + mode;
        }
        ASSERT_EQ(0, train(c.config, ranks, run, args, &out)) << out;
        const std::vector<double> l = losses(dir_.file(run));
        ASSERT_EQ(l.size(), 20u) << out;
        if (ranks == 1) {
          one = l;
          continue;
        }
        EXPECT_LT(worst_relative(one, l), 1e-5);
      }
  }
}

TEST_F(MultiRank, ShardedGradientAccumulationMatchesOneRankInFewLayerBuffers) {
  // Two micro-batches per step: a sharded rank gathers every layer per micro-batch (and again
  // for its backward), reduce-scatters each micro-batch's gradient into its shard, and holds at
  // most the pools' whole-layer buffers (prefetch + 1 + tied parameter buffers, 2 + tied
  // gradient ones); the losses stay those of one rank.
  const std::string base = " --set train.steps=12 --set train.grad_accum=2 --set run.overwrite=true --set checkpoint.enabled=false";
  std::string out;
  ASSERT_EQ(0, train("tiny-adamw.yaml", 1, "one", base, &out)) << out;
  const std::vector<double> one = losses(dir_.file("one"));
  ASSERT_EQ(one.size(), 12u) << out;
  for (const auto& [ranks, mode] : std::vector<std::pair<int, std::string>>{
           {2, "--set distributed.fsdp=full --set distributed.prefetch=1"},
           {4, "--set distributed.fsdp=hybrid --set distributed.ranks_per_node=2"}}) {
    SCOPED_TRACE(std::to_string(ranks) + " ranks, " + mode);
    const std::string run = "accum" + std::to_string(ranks);
    ASSERT_EQ(0, train("tiny-adamw.yaml", ranks, run, base + " " + mode, &out)) << out;
    EXPECT_LT(worst_relative(one, losses(dir_.file(run))), 1e-5);
    const bool prefetch1 = mode.find("prefetch=1") != std::string::npos;
    std::ifstream in(dir_.file(run) + "/metrics.jsonl");
    for (std::string line; std::getline(in, line);) {
      const nlohmann::json held = nlohmann::json::parse(line).at("fsdp_buffers_held");
      // tiny: a tied head, 4 layers; distributed.prefetch 2 by default.
      EXPECT_LE(held.at("params").get<int>(), (prefetch1 ? 1 : 2) + 2) << line;
      EXPECT_GE(held.at("params").get<int>(), 2) << line;
      EXPECT_LE(held.at("grads").get<int>(), 3) << line;
    }
  }
}

TEST_F(MultiRank, AStaggeredShardedRunRefreshesOnTheWholeModelsSchedule) {
  // With runtime.stagger the refresh offsets are balanced over every block of the model; a
  // sharded rank's blocks keep those offsets (not ones balanced over its own blocks), so 4 ranks
  // continue a one-rank checkpoint on the one-rank losses.
  std::string out;
  const std::string base = " --set train.steps=20 --set optim.precondition_frequency=5 --set runtime.stagger=true ";
  ASSERT_EQ(0, train("tiny-soap.yaml", 1, "start", base + "--set run.overwrite=true --set train.stop_after=8", &out)) << out;
  std::vector<double> one;
  for (int ranks : {1, 4}) {
    const std::string run = "stagger" + std::to_string(ranks);
    std::filesystem::remove_all(dir_.file(run));
    std::filesystem::copy(dir_.file("start"), dir_.file(run), std::filesystem::copy_options::recursive);
    ASSERT_EQ(0, train("tiny-soap.yaml", ranks, run,
                       base + "--resume latest --set checkpoint.allow_changes=[train.micro_batch] --set distributed.fsdp=full "
                              "--set checkpoint.enabled=false",
                       &out))
        << out;
    const std::vector<double> l = losses(dir_.file(run));
    ASSERT_EQ(l.size(), 20u) << out;
    if (ranks == 1) one = l;
    else EXPECT_LT(worst_relative(one, l), 1e-5);
  }
}

TEST_F(MultiRank, ACheckpointOfTwoRanksResumesAtOneAndFour) {
  std::string out;
  const std::string base = " --set train.steps=16 --set optim.precondition_frequency=5 --set distributed.fsdp=none ";
  ASSERT_EQ(0, train("tiny-soap.yaml", 2, "straight", base, &out)) << out;
  const std::vector<double> straight = losses(dir_.file("straight"));
  for (int ranks : {1, 4}) {
    const std::string run = "resumed" + std::to_string(ranks);
    ASSERT_EQ(0, train("tiny-soap.yaml", 2, run, base + "--set train.stop_after=8", &out)) << out;
    // The micro-batch changes with the world size on purpose: the global batch stays.
    ASSERT_EQ(0, train("tiny-soap.yaml", ranks, run, base + "--resume latest --set checkpoint.allow_changes=[train.micro_batch]",
                       &out))
        << out;
    const std::vector<double> resumed = losses(dir_.file(run));
    ASSERT_EQ(resumed.size(), straight.size()) << out;
    for (size_t i = 0; i < 8; ++i) EXPECT_EQ(resumed[i], straight[i]) << "step " << i + 1;
    EXPECT_LT(worst_relative(straight, resumed), 1e-5) << "resumed at " << ranks << " ranks";
  }
}

TEST_F(MultiRank, AShardedCheckpointMissingARanksFileIsRefusedByName) {
  std::string out;
  ASSERT_EQ(0, train("tiny-adamw.yaml", 2, "sharded", "--set train.steps=2 --set distributed.fsdp=full", &out)) << out;
  const std::string ck = dir_.file("sharded") + "/checkpoints/step00000002";
  ASSERT_TRUE(std::filesystem::exists(ck + "/rank00001.h5")) << out;
  std::filesystem::remove(ck + "/rank00001.h5");
  EXPECT_NE(0, train("tiny-adamw.yaml", 1, "sharded", "--set train.steps=3 --resume latest "
                     "--set checkpoint.allow_changes=[train.micro_batch]", &out));
  EXPECT_NE(out.find("rank00001.h5"), std::string::npos) << out;
}

TEST_F(MultiRank, ACheckpointReLaidOutAtAnotherWorldSizeHoldsTheSameBits) {
  // A run resumed with nothing left to train writes the loaded state as its checkpoint: from 4
  // sharded ranks to 1 (one file) and 2 (sharded), and from 1 back to 4, every tensor (put back
  // whole), block coordinate and value is bit-identical to the original's: the loaded state is
  // the saved state.
  std::string out;
  const std::string base = " --set train.steps=16 --set optim.precondition_frequency=5 --set distributed.fsdp=full "
                           "--set runtime.mode=asteria --set runtime.shadow.delay=3 --set train.stop_after=8 ";
  ASSERT_EQ(0, train("tiny-soap.yaml", 4, "original", base, &out)) << out;
  const std::string step = "/checkpoints/step00000008";
  const auto original = checkpoint_contents(dir_.file("original") + step);
  ASSERT_GT(original.size(), 50u);
  // Refreshes were in flight at the checkpoint (delay 3), so their snapshots travel too.
  EXPECT_TRUE(std::any_of(original.begin(), original.end(),
                          [](const auto& kv) { return kv.first.rfind("/values/shadow.open.", 0) == 0; }));
  std::string from = "original";
  for (int ranks : {1, 2, 4}) {
    const std::string run = "relaid" + std::to_string(ranks);
    std::filesystem::remove_all(dir_.file(run));
    std::filesystem::copy(dir_.file(from), dir_.file(run), std::filesystem::copy_options::recursive);
    ASSERT_EQ(0, train("tiny-soap.yaml", ranks, run, base + "--resume latest --set checkpoint.allow_changes=[train.micro_batch]",
                       &out))
        << out;
    // Written again at this world size: one file per rank.
    const nlohmann::json m = nlohmann::json::parse(std::ifstream(dir_.file(run) + step + "/manifest.json"));
    EXPECT_EQ(m.at("world_size").get<int>(), ranks) << out;
    EXPECT_EQ(m.at("files").size(), static_cast<size_t>(ranks)) << out;
    const auto relaid = checkpoint_contents(dir_.file(run) + step);
    EXPECT_EQ(relaid.size(), original.size()) << ranks << " ranks";
    for (const auto& [name, v] : original) {
      auto it = relaid.find(name);
      ASSERT_NE(it, relaid.end()) << name << " is missing at " << ranks << " ranks";
      EXPECT_TRUE(it->second == v) << name << " differs at " << ranks << " ranks";
    }
    from = run;   // 4 -> 1 -> 2 -> 4
  }
}

TEST_F(MultiRank, ShardedCheckpointsLoadAtOtherWorldSizes) {
  // A checkpoint of 4 ranks (fsdp full: one file per rank, each its row-blocks and blocks)
  // resumes at 2 and at 1; one of 1 rank resumes at 2 and at 4. Continued to step 16, the losses
  // match the run continued at the checkpoint's own world size within 1e-5 relative (the steps
  // before the checkpoint are the same lines, cut back from the interrupted run).
  std::string out;
  const std::string base = " --set train.steps=16 --set optim.precondition_frequency=5 --set distributed.fsdp=full "
                           "--set checkpoint.every=4 ";
  const std::string resume = base + "--resume latest --set checkpoint.allow_changes=[train.micro_batch] ";
  for (int from : {4, 1}) {
    SCOPED_TRACE("checkpoint of " + std::to_string(from) + " ranks");
    const std::string start = "start" + std::to_string(from);
    ASSERT_EQ(0, train("tiny-soap.yaml", from, start, base + "--set train.stop_after=8", &out)) << out;
    ASSERT_TRUE(std::filesystem::exists(dir_.file(start) + "/checkpoints/step00000008/manifest.json")) << out;
    const int files = static_cast<int>(std::distance(std::filesystem::directory_iterator(dir_.file(start) + "/checkpoints/step00000008"),
                                                     std::filesystem::directory_iterator{})) - 1;
    EXPECT_EQ(files, from);   // rank<r>.h5 of every rank, and the manifest
    if (from > 1) {
      // checkpoint.async (the default): step 4's checkpoint was copied beside step 5's forward
      // (checkpoint_copy_s on its line), written on the checkpoint threads and published by
      // all ranks together at a later step boundary.
      EXPECT_TRUE(std::filesystem::exists(dir_.file(start) + "/checkpoints/step00000004/manifest.json")) << out;
      std::ifstream in(dir_.file(start) + "/metrics.jsonl");
      std::string line;
      for (int i = 0; i < 5; ++i) std::getline(in, line);
      EXPECT_TRUE(nlohmann::json::parse(line).contains("checkpoint_copy_s")) << line;
    }
    std::vector<double> reference;
    for (int ranks : {from, 2, from == 4 ? 1 : 4}) {
      const std::string run = start + "-at" + std::to_string(ranks);
      std::filesystem::remove_all(dir_.file(run));
      std::filesystem::copy(dir_.file(start), dir_.file(run), std::filesystem::copy_options::recursive);
      ASSERT_EQ(0, train("tiny-soap.yaml", ranks, run, resume, &out)) << out;
      const std::vector<double> l = losses(dir_.file(run));
      ASSERT_EQ(l.size(), 16u) << out;
      if (reference.empty()) {
        reference = l;
        continue;
      }
      for (size_t i = 0; i < 8; ++i) EXPECT_EQ(l[i], reference[i]) << "step " << i + 1;
      EXPECT_LT(worst_relative(reference, l), 1e-5) << "resumed at " << ranks << " ranks";
    }
  }
}
