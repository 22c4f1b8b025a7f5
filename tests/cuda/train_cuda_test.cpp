// Training on the CUDA backend (runtime.backend cuda, train/device_training.hpp) against the CPU:
// the tiny model with AdamW, SOAP (native and asteria), Shampoo and KL-Shampoo for 50 steps follows the CPU's loss
// curve (fp32: within rounding order; bf16 GEMM operands: within bf16 rounding), a run
// stopped at a checkpoint and resumed on the device ends with the bits of a straight run, and
// optimizer state tiered out of GPU memory (pinned host, disk) changes no bit. Skipped without a
// device. Tolerance of the curve: both sides are fp32 (no TF32), so they differ by summation
// order only (~1e-6 relative per op); 50 steps of AdamW at lr 1e-2 amplify that, and 1e-3
// relative per step still tells a wrong update or gradient (those are off by percents at once).
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "core/backend.hpp"
#include "trainer_runs.hpp"

namespace asteria {
namespace {

using testing::TempDir;

class TrainOnCuda : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!cuda_backend_available(&why)) GTEST_SKIP() << "no GPU: " << why;
    testing::write_bigram_tokens(dir_.file("train.bin"), 60000, 512, 1);
    testing::write_bigram_tokens(dir_.file("val.bin"), 6000, 512, 2);
  }
  Config config(const std::string& backend, const std::string& run, std::vector<std::string> extra = {}) {
    std::vector<std::string> sets = {"data.train=" + dir_.file("train.bin"), "data.eval=" + dir_.file("val.bin"),
                                     "run.dir=" + dir_.file(run),         "run.overwrite=true",
                                     "train.steps=50",                    "train.micro_batch=8",
                                     "train.warmup_steps=5",              "train.eval_every=25",
                                     "data.eval_batches=2",               "optim.lr=1e-2",
                                     "runtime.backend=" + backend};
    sets.insert(sets.end(), extra.begin(), extra.end());
    return load_config_text("seed: 3\nmodel:\n  preset: tiny\n", "tiny.yaml", sets);
  }
  std::vector<double> losses(const std::string& run) { return testing::losses(dir_.file(run)); }
  TempDir dir_{"train-cuda"};
};

TEST_F(TrainOnCuda, AdamWFollowsTheCpuLossCurve) {
  Trainer(config("cpu", "cpu")).run();
  const TrainResult gpu = Trainer(config("cuda", "cuda", {"runtime.precision=fp32"})).run();
  const std::vector<double> a = losses("cpu"), b = losses("cuda");
  ASSERT_EQ(a.size(), 50u);
  ASSERT_EQ(b.size(), 50u);
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(b[i], a[i], 1e-3 * a[i]) << "step " << i + 1;
  EXPECT_LT(gpu.final_loss, 0.5 * std::log(512.0));
  std::ifstream info(dir_.file("cuda/run_info.json"));
  EXPECT_NE(nlohmann::json::parse(info)["backend"].get<std::string>().find("cuda"), std::string::npos);
}

// runtime.precision bf16 (the GPU's default): the same curve within bf16 rounding. Rounding the
// operands to 8 significant bits moves a step's loss by ~1e-3 relative at first, and 50 steps
// of training amplify differences; 3e-2 relative still catches a broken GEMM or update (a
// wrong one leaves the loss near ln 512 = 6.2 or makes it diverge).
TEST_F(TrainOnCuda, Bf16FollowsTheCpuLossCurveWithinBf16Rounding) {
  Trainer(config("cpu", "cpu")).run();
  Trainer(config("cuda", "bf16")).run();
  const std::vector<double> a = losses("cpu"), b = losses("bf16");
  ASSERT_EQ(b.size(), a.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(b[i], a[i], 3e-2 * a[i]) << "step " << i + 1;
}

// The second-order optimizers on the device (the CUDA block backend), with their refreshes
// computed on the host inline (native), on the shadow pipeline's host workers (asteria), and by
// the GPU's solvers on the workers' low-priority streams (asteria, runtime.shadow.lane device),
// against the same optimizer on the CPU in the same mode (its refreshes on the host). fp32 on both sides; the roots and bases
// come from factors that differ by summation order, and a refresh of a nearly degenerate factor
// turns its basis within the degenerate space, which the direction does not see at first order:
// 5e-3 relative per step allows that over 50 steps and still catches a wrong statistic, basis
// change, moment, install or update (those leave the loss near ln 512 or make it diverge).
TEST_F(TrainOnCuda, SecondOrderOptimizersFollowTheCpuLossCurve) {
  struct Case {
    std::string optimizer, mode, gpu_lane;
  };
  for (const Case& c : std::vector<Case>{{"soap", "native", ""},
                                         {"soap", "asteria", ""},
                                         {"shampoo", "asteria", ""},
                                         {"kl_shampoo", "asteria", ""},
                                         {"soap", "asteria", "device"},
                                         {"shampoo", "asteria", "device"}}) {
    const std::string run = c.optimizer + "-" + c.mode + (c.gpu_lane.empty() ? "" : "-" + c.gpu_lane);
    const std::vector<std::string> sets = {"optim.name=" + c.optimizer, "runtime.mode=" + c.mode};
    std::vector<std::string> on_gpu = sets;
    on_gpu.push_back("runtime.precision=fp32");
    if (!c.gpu_lane.empty()) on_gpu.push_back("runtime.shadow.lane=" + c.gpu_lane);
    Trainer(config("cpu", "cpu-" + run, sets)).run();
    const TrainResult gpu = Trainer(config("cuda", "cuda-" + run, on_gpu)).run();
    const std::vector<double> a = losses("cpu-" + run), b = losses("cuda-" + run);
    ASSERT_EQ(b.size(), a.size()) << run;
    for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(b[i], a[i], 5e-3 * a[i]) << run << " step " << i + 1;
    EXPECT_LT(gpu.final_loss, 0.5 * std::log(512.0)) << run;
  }
}

// A SOAP run on the device stopped at a checkpoint with refreshes in flight (asteria) and resumed
// ends with a straight run's bits: the image, its counters and the in-flight jobs carry it all.
TEST_F(TrainOnCuda, SoapStoppedAndResumedEqualsStraightBitForBit) {
  const std::vector<std::string> soap = {"optim.name=soap", "runtime.mode=asteria"};
  const std::vector<float> straight = testing::train_params(config("cuda", "soap-straight", soap));
  std::vector<std::string> first = soap, second = soap;
  first.insert(first.end(), {"checkpoint.every=23", "train.stop_after=23"});
  second.insert(second.end(), {"checkpoint.every=23", "checkpoint.resume=latest"});
  Trainer(config("cuda", "soap-resumed", first)).run();
  EXPECT_TRUE(testing::same_bits(testing::train_params(config("cuda", "soap-resumed", second)), straight));
}

TEST_F(TrainOnCuda, StoppedAndResumedEqualsStraightBitForBit) {
  const std::vector<float> straight = testing::train_params(config("cuda", "straight"));
  Config first = config("cuda", "resumed", {"checkpoint.every=20", "train.stop_after=20"});
  Trainer(first).run();
  Config second = config("cuda", "resumed", {"checkpoint.every=20", "checkpoint.resume=latest"});
  EXPECT_TRUE(testing::same_bits(testing::train_params(second), straight));
}

// GPU tiers: the device tier (GPU memory) holding one layer's optimizer state, a quarter of it
// homed in pinned host memory and the rest on the disk tier, streamed through the device tier's
// cache on the tier manager's low-priority stream. Where the state lives never changes what is
// computed: the bits of the run with all of it in GPU memory, for AdamW and for SOAP with its
// refreshes on the host workers; and a tiered run stopped at a checkpoint and resumed (the state
// restored through the tiers) ends with them too.
TEST_F(TrainOnCuda, TieredOptimizerStateEqualsAllInGpuMemoryBitForBit) {
  for (const std::vector<std::string>& sets : {std::vector<std::string>{"optim.name=adamw"},
                                               std::vector<std::string>{"optim.name=soap", "runtime.mode=asteria"}}) {
    SCOPED_TRACE(sets[0]);
    const std::string name = sets[0].substr(sets[0].find('=') + 1);
    const std::vector<float> in_gpu_memory = testing::train_params(config("cuda", name + "-gpu", sets));
    std::vector<std::string> tiered = sets;
    for (const std::string& t : testing::quarter_host_rest_disk(config("cuda", name + "-probe", sets)))
      tiered.push_back(t);
    EXPECT_TRUE(testing::same_bits(testing::train_params(config("cuda", name + "-tiered", tiered)), in_gpu_memory));
    size_t from_disk = 0, from_host = 0;   // over the run's steps
    std::ifstream metrics(dir_.file(name + "-tiered/metrics.jsonl"));
    for (std::string line; std::getline(metrics, line);) {
      const nlohmann::json r = nlohmann::json::parse(line);
      if (!r.contains("tier_moved_bytes")) continue;
      from_disk += r["tier_moved_bytes"]["disk_to_device"].get<size_t>();
      from_host += r["tier_moved_bytes"]["host_to_device"].get<size_t>();
    }
    EXPECT_GT(from_disk, 0u);
    EXPECT_GT(from_host, 0u);

    std::vector<std::string> first = tiered, second = tiered;
    first.insert(first.end(), {"checkpoint.every=20", "train.stop_after=20"});
    second.insert(second.end(), {"checkpoint.every=20", "checkpoint.resume=latest"});
    Trainer(config("cuda", name + "-resumed", first)).run();
    EXPECT_TRUE(testing::same_bits(testing::train_params(config("cuda", name + "-resumed", second)), in_gpu_memory));
  }
}

}  // namespace
}  // namespace asteria
