// Two ranks on two GPUs (runtime.backend cuda) under real mpirun: each rank on its own GPU
// (train/rank_device.hpp); replicated (fsdp none: the gradients' all-reduce over NCCL in device
// memory) and sharded (fsdp full: each rank's shards and the layers in flight in device memory,
// gathered and reduce-scattered over NCCL, fsdp/device_shards.hpp), against the same two ranks
// on the CPU with MPI. Skipped with fewer than two GPUs
// (NCCL refuses two ranks on one device). Tolerances as in train_cuda_test.cpp: fp32 on both
// sides, so the runs differ by summation order only (NCCL's ring sums in another order than
// MPI's reduction, as the GPU's kernels do than the CPU's); every step also checks that the two
// replicas hold the same bits (distributed.check_every), which NCCL's all-reduce gives.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/backend.hpp"
#include "test_util.hpp"

namespace asteria {
namespace {

using testing::TempDir;

class TwoRanksOnCuda : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda_device_count() < 2) GTEST_SKIP() << "fewer than two GPUs (" << cuda_device_count() << ")";
    testing::write_bigram_tokens(dir_.file("train.bin"), 60000, 512, 1);
  }
  // 40 steps of the tiny model at 2 ranks, micro-batch 4 each.
  void train(const std::string& config, const std::string& backend, const std::string& run, const std::string& extra,
             const std::string& fsdp = "none") {
    std::string out;
    const int rc = testing::run_command(
        testing::kMpirun + "-np 2 -x OMP_NUM_THREADS=2 " + testing::kTrain + " --config " + testing::kConfigs + "/" +
            config + " --set data.train=" + dir_.file("train.bin") + " --set data.eval= --set run.dir=" + dir_.file(run) +
            " --set run.overwrite=true --set train.steps=40 --set train.micro_batch=4 --set train.warmup_steps=5" +
            " --set distributed.fsdp=" + fsdp + " --set distributed.check_every=1 --set runtime.backend=" + backend +
            (backend == "cuda" ? " --set runtime.precision=fp32 " : " ") + extra,
        &out);
    ASSERT_EQ(rc, 0) << out;
  }
  TempDir dir_{"train-cuda-ranks"};
};

TEST_F(TwoRanksOnCuda, AdamWFollowsTwoCpuRanks) {
  train("tiny-adamw.yaml", "cpu", "cpu", "");
  train("tiny-adamw.yaml", "cuda", "cuda", "");
  const std::vector<double> a = testing::losses(dir_.file("cpu")), b = testing::losses(dir_.file("cuda"));
  ASSERT_EQ(a.size(), 40u);
  ASSERT_EQ(b.size(), 40u);
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(b[i], a[i], 1e-3 * a[i]) << "step " << i + 1;
}

// SOAP in asteria mode with replicas: coherence gives each block one owner among the ranks, whose
// host workers compute its refresh from the device state and ship it to the other replica.
TEST_F(TwoRanksOnCuda, SoapAsteriaWithCoherenceFollowsTwoCpuRanks) {
  const std::string soap = "--set runtime.mode=asteria --set optim.precondition_frequency=5";
  train("tiny-soap.yaml", "cpu", "cpu-soap", soap);
  train("tiny-soap.yaml", "cuda", "cuda-soap", soap);
  const std::vector<double> a = testing::losses(dir_.file("cpu-soap")), b = testing::losses(dir_.file("cuda-soap"));
  ASSERT_EQ(b.size(), a.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(b[i], a[i], 5e-3 * a[i]) << "step " << i + 1;
}

// Sharded over the two GPUs: the same shards and plan as two CPU ranks; NCCL's grouped
// broadcasts move the same bits as MPI's gather, so the runs differ by the kernels' and the
// reductions' summation order only.
TEST_F(TwoRanksOnCuda, ShardedAdamWFollowsTwoShardedCpuRanks) {
  train("tiny-adamw.yaml", "cpu", "cpu-full", "", "full");
  train("tiny-adamw.yaml", "cuda", "cuda-full", "", "full");
  const std::vector<double> a = testing::losses(dir_.file("cpu-full")), b = testing::losses(dir_.file("cuda-full"));
  ASSERT_EQ(b.size(), a.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(b[i], a[i], 1e-3 * a[i]) << "step " << i + 1;
}

TEST_F(TwoRanksOnCuda, ShardedSoapAsteriaFollowsTwoShardedCpuRanks) {
  const std::string soap = "--set runtime.mode=asteria --set optim.precondition_frequency=5";
  train("tiny-soap.yaml", "cpu", "cpu-soap-full", soap, "full");
  train("tiny-soap.yaml", "cuda", "cuda-soap-full", soap, "full");
  const std::vector<double> a = testing::losses(dir_.file("cpu-soap-full")), b = testing::losses(dir_.file("cuda-soap-full"));
  ASSERT_EQ(b.size(), a.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(b[i], a[i], 5e-3 * a[i]) << "step " << i + 1;
}

}  // namespace
}  // namespace asteria
