// runtime.backend: what a run on the CUDA backend refuses, and how. Where a GPU is present the
// device tests (tests/cuda) train on it; here the refusals, which hold on every machine.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "core/backend.hpp"
#include "core/error.hpp"
#include "test_util.hpp"
#include "config/config.hpp"
#include "train/trainer.hpp"

using namespace asteria;
using asteria::testing::TempDir;

namespace {

Config tiny(const TempDir& dir, const std::string& optimizer) {
  return load_config_text("model:\n  preset: tiny\n", "tiny.yaml",
                          {"data.train=" + dir.file("train.bin"), "run.dir=" + dir.file("run"), "train.steps=2",
                           "optim.name=" + optimizer, "runtime.backend=cuda"});
}

}  // namespace

TEST(BackendChoice, CudaTakesEveryOptimizer) {
  TempDir dir("backend-optimizers");
  for (const std::string optimizer : {"adamw", "soap", "shampoo", "kl_shampoo"})
    EXPECT_NO_THROW(check_supported(tiny(dir, optimizer))) << optimizer;
}

TEST(BackendChoice, CudaWithoutADeviceExitsNonZeroBeforeWritingTheRun) {
  std::string why;
  if (cuda_backend_available(&why)) GTEST_SKIP() << "a GPU is here: tests/cuda train on it";
  TempDir dir("backend-cuda");
  asteria::testing::write_bigram_tokens(dir.file("train.bin"), 20000, 512, 1);
  std::string out;
  const int rc = asteria::testing::run_command(
      asteria::testing::kTrain + " --config " + asteria::testing::kConfigs + "/tiny-adamw.yaml --set data.train=" +
          dir.file("train.bin") + " --set data.eval= --set run.dir=" + dir.file("run") +
          " --set train.steps=2 --set runtime.backend=cuda",
      &out);
  EXPECT_NE(rc, 0) << out;
  EXPECT_NE(out.find("runtime.backend cuda: " + why), std::string::npos) << out;
  EXPECT_FALSE(std::filesystem::exists(dir.file("run/metrics.jsonl")));
}

// Sharding on the GPU is planned like the CPU's: a launch of 8 ranks, each GPU holding its
// shards, the layers in flight, its shards' optimizer state and the activations.
TEST(BackendChoice, ShardedCudaLaunchesArePlannedPerGpu) {
  TempDir dir("backend-ranks");
  Config cfg = tiny(dir, "adamw");
  cfg.distributed.world_size = 2;
  EXPECT_NO_THROW(check_supported(cfg));   // fsdp full, the default
  std::string out;
  ASSERT_EQ(0, asteria::testing::run_command(asteria::testing::kTrain + " --config " + asteria::testing::kConfigs +
                                                 "/olmo-1b-soap.yaml --set model.preset=olmo-7b --set runtime.backend=cuda "
                                                 "--set distributed.world_size=8 --set distributed.ranks_per_node=4 --dry-run",
                                             &out))
      << out;
  // The largest rank's: its shard (3.22 GiB) and 3 whole-layer buffers, 2 gradient buffers and
  // the receive buffer, its shard's SOAP state, 41.12 GiB of bf16 activations.
  EXPECT_NE(out.find("on each GPU:      74.09 GiB  (runtime.backend cuda, the largest rank: params 5.52 GiB, grads and "
                     "receive buffer 4.88 GiB, the device tier's optimizer state 22.57 GiB, activations 41.12 GiB)"),
            std::string::npos)
      << out;
}

// Under real mpirun, sharded or replicated: where the ranks do not each have a GPU, they say which
// rank saw which devices. Nothing is written either way.
TEST(BackendChoice, TwoRanksOnCudaWithoutAGpuEachExitNonZeroBeforeWritingTheRun) {
  if (cuda_device_count() >= 2) GTEST_SKIP() << "two GPUs are here: tests/cuda train two ranks on them";
  TempDir dir("backend-two-ranks");
  asteria::testing::write_bigram_tokens(dir.file("train.bin"), 20000, 512, 1);
  // (CUDA_VISIBLE_DEVICES as on a plain launch: unset.)
  const std::string train = "env -u CUDA_VISIBLE_DEVICES " + asteria::testing::kMpirun + "-np 2 " + asteria::testing::kTrain +
                            " --config " + asteria::testing::kConfigs + "/tiny-adamw.yaml --set data.train=" +
                            dir.file("train.bin") + " --set data.eval= --set run.dir=" + dir.file("run") +
                            " --set train.steps=2 --set runtime.backend=cuda";
  std::string out;
  for (const char* fsdp : {"full", "none"}) {
    EXPECT_NE(asteria::testing::run_command(train + " --set distributed.fsdp=" + fsdp, &out), 0) << out;
    // Rank 1 sees device 1 only; where there is no GPU at all rank 0 says so too.
    EXPECT_NE(out.find("runtime.backend cuda: rank 1 (local rank 1 of 2, CUDA_VISIBLE_DEVICES=1): "), std::string::npos)
        << fsdp << ": " << out;
  }
  EXPECT_FALSE(std::filesystem::exists(dir.file("run/metrics.jsonl")));
}

TEST(BackendChoice, DryRunSplitsDeviceAndHostMemory) {
  std::string out;
  ASSERT_EQ(0, asteria::testing::run_command(asteria::testing::kTrain + " --config " + asteria::testing::kConfigs +
                                                 "/olmo-1b-adamw.yaml --set runtime.backend=cuda --dry-run",
                                             &out))
      << out;
  // Every state homed in the device tier: 4.38 x 2 + 2.19 + 13.15 + 14.74 on the device (the
  // GEMMs' bf16 copy of the weights, the activations stored as bf16: runtime.precision auto is
  // bf16 on cuda), the parameters' image on the host.
  EXPECT_NE(out.find("on the device:    38.85 GiB"), std::string::npos) << out;
  EXPECT_NE(out.find("in host memory:   4.38 GiB"), std::string::npos) << out;
  // A 4 GiB device tier: what does not fit is homed in the (pinned) host tier, 12 699 MiB of it.
  ASSERT_EQ(0, asteria::testing::run_command(asteria::testing::kTrain + " --config " + asteria::testing::kConfigs +
                                                 "/olmo-1b-adamw.yaml --set runtime.backend=cuda "
                                                 "--set runtime.tiers.device.bytes=4GiB --dry-run",
                                             &out))
      << out;
  EXPECT_NE(out.find("on the device:    29.70 GiB"), std::string::npos) << out;   // 4.38 x 2 + 2.19 + 4 + 14.74
  EXPECT_NE(out.find("in host memory:   16.79 GiB"), std::string::npos) << out;   // 4.38 + 12.40
}
