// The asteria-train command line: exit codes and messages, --dry-run, --print-plan.
#include <gtest/gtest.h>

#include <omp.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "test_util.hpp"
#include "train/estimates/memory_estimate.hpp"

using asteria::testing::run_command;
using asteria::testing::TempDir;

namespace {
const std::string kTrain = std::string(ASTERIA_BIN_DIR) + "/asteria-train";
const std::string kConfigs = std::string(ASTERIA_SOURCE_DIR) + "/configs";
}  // namespace

TEST(Cli, DryRunReportsParamsMemoryAndFlops) {
  std::string out;
  ASSERT_EQ(0, run_command(kTrain + " --config " + kConfigs + "/olmo-1b-adamw.yaml --dry-run", &out)) << out;
  EXPECT_NE(out.find("d_model: 2048"), std::string::npos) << out;
  EXPECT_NE(out.find("total:        1176764416"), std::string::npos) << out;  // OLMo-1B, tied
  EXPECT_NE(out.find("optimizer state:"), std::string::npos);
  EXPECT_NE(out.find("activations:"), std::string::npos);
  EXPECT_NE(out.find("training FLOPs per token:"), std::string::npos);
}

// Every config under configs/ is one users run as shipped: each must validate. The continue
// recipes start from a downloaded Hugging Face folder (model.init_from, relative to the working
// directory) that is not here; they may fail only on that, naming the key.
TEST(Cli, EveryShippedConfigValidates) {
  int checked = 0;
  for (const auto& entry : std::filesystem::directory_iterator(kConfigs)) {
    if (entry.path().extension() != ".yaml") continue;
    std::string out;
    const int rc = run_command(kTrain + " --config " + entry.path().string() + " --dry-run", &out);
    if (rc != 0 && out.find("model.init_from") != std::string::npos) {
      EXPECT_EQ(1, rc) << entry.path() << "\n" << out;
      EXPECT_NE(out.find("model.init_from"), std::string::npos) << entry.path() << "\n" << out;
      EXPECT_NE(out.find("no config.json there"), std::string::npos) << entry.path() << "\n" << out;
    } else {
      EXPECT_EQ(0, rc) << entry.path() << "\n" << out;
    }
    ++checked;
  }
  EXPECT_GE(checked, 17);
}

TEST(Cli, PrintPlanListsOpsPerLayer) {
  std::string out;
  ASSERT_EQ(0, run_command(kTrain + " --config " + kConfigs + "/tiny-adamw.yaml --set train.grad_accum=2 --print-plan", &out)) << out;
  EXPECT_NE(out.find("backward      blocks.1     micro=1"), std::string::npos) << out;
  EXPECT_NE(out.find("clip_grads"), std::string::npos);
}

// train.activation_recompute: a recompute op before the backward of each recomputed block
// (every_k = 2 on two blocks: block 0 only), and --dry-run's activations shrink by the block
// buffers not kept.
TEST(Cli, ActivationRecomputeInThePlanAndTheDryRun) {
  std::string out;
  const std::string base = kTrain + " --config " + kConfigs + "/tiny-adamw.yaml ";
  ASSERT_EQ(0, run_command(base + "--set train.activation_recompute=every_k --print-plan", &out)) << out;
  EXPECT_NE(out.find("recompute     blocks.0     micro=0"), std::string::npos) << out;
  EXPECT_EQ(out.find("recompute     blocks.1"), std::string::npos) << out;
  EXPECT_LT(out.find("recompute     blocks.0"), out.find("backward      blocks.0")) << out;
  auto activations = [&](const std::string& mode) {
    std::string dry;
    EXPECT_EQ(0, run_command(base + "--set train.activation_recompute=" + mode + " --dry-run", &dry)) << dry;
    const size_t at = dry.find("activations:");
    EXPECT_NE(at, std::string::npos) << dry;
    EXPECT_NE(dry.find("recompute " + mode, at), std::string::npos) << dry;
    return std::stod(dry.substr(at + 12));
  };
  EXPECT_LT(activations("blocks"), activations("none"));
  ASSERT_NE(0, run_command(base + "--set train.activation_recompute=some --dry-run", &out));
  EXPECT_NE(out.find("'train.activation_recompute' = some is invalid: it must be one of: none, blocks, every_k"),
            std::string::npos) << out;
  // The old key (before "checkpoint" meant a saved run only) still works, with a note naming the new one.
  ASSERT_EQ(0, run_command(base + "--set train.activation_checkpointing=blocks --dry-run", &out)) << out;
  EXPECT_NE(out.find("train.activation_checkpointing is now train.activation_recompute"), std::string::npos) << out;
  EXPECT_NE(out.find("recompute blocks"), std::string::npos) << out;
}

// The shadow pipeline's ops at a refresh step and a plain step; refreshes of the synchronous
// warm-up (runtime.shadow.sync_steps) have none.
// (runtime.stagger=false: every block on the reference schedule, so the steps below are exact.)
TEST(Cli, PrintPlanShowsShadowOps) {
  const std::string base = kTrain + " --config " + kConfigs + "/tiny-soap.yaml --set runtime.mode=asteria --set runtime.stagger=false " +
                           "--set runtime.shadow.lane=workers --set runtime.shadow.delay=2 --set optim.precondition_frequency=10 " +
                           "--set train.warmup_steps=5 --print-plan ";
  std::string out;
  // SOAP's first refresh is at step 11 (count t - 1 = 10): snapshot and root jobs publishing at 13.
  ASSERT_EQ(0, run_command(base + "--plan-step 11", &out)) << out;
  EXPECT_NE(out.find("staging  snapshot      blocks.0"), std::string::npos) << out;
  EXPECT_NE(out.find("host     root_job      blocks.0     block=0 publish_at=13"), std::string::npos) << out;
  EXPECT_EQ(out.find("publish_wait"), std::string::npos) << out;
  ASSERT_EQ(0, run_command(base + "--plan-step 13", &out)) << out;
  EXPECT_NE(out.find("compute  publish_wait  blocks.0"), std::string::npos) << out;
  EXPECT_EQ(out.find("root_job"), std::string::npos) << out;
  ASSERT_EQ(0, run_command(base + "--plan-step 12", &out)) << out;
  EXPECT_EQ(out.find("publish_wait"), std::string::npos) << out;
  EXPECT_EQ(out.find("snapshot "), std::string::npos) << out;
  // With the refresh of step 11 inside the warm-up it runs inline: no shadow ops at 11 or 13.
  // The warm-up is train.warmup_steps unless runtime.shadow.sync_steps says otherwise.
  for (const char* warmup : {"--set runtime.shadow.sync_steps=11 ", "--set train.warmup_steps=11 "})
    for (const char* step : {"11", "13"}) {
      ASSERT_EQ(0, run_command(base + warmup + "--plan-step " + step, &out)) << out;
      EXPECT_EQ(out.find("root_job"), std::string::npos) << warmup << step << out;
      EXPECT_EQ(out.find("publish_wait"), std::string::npos) << warmup << step << out;
    }
  ASSERT_EQ(0, run_command(base + "--set train.warmup_steps=11 --set runtime.shadow.sync_steps=0 --plan-step 11", &out));
  EXPECT_NE(out.find("root_job"), std::string::npos) << out;
  // runtime.shadow.lane auto: host workers only when they have cores of their own. A compute
  // lane on every core leaves them none; one compute thread and one worker fit 2 or more cores.
  const std::string compute_op = "compute  root_jobs", host_op = "host     root_job ";
  ASSERT_EQ(0, run_command(base + "--set runtime.shadow.lane=auto --set runtime.threads=" +
                               std::to_string(omp_get_num_procs()) + " --plan-step 11",
                           &out));
  EXPECT_NE(out.find(compute_op), std::string::npos) << out;
  EXPECT_EQ(out.find(host_op), std::string::npos) << out;
  EXPECT_NE(out.find("root jobs on the compute lane, in parts"), std::string::npos) << out;
  ASSERT_EQ(0, run_command(base + "--set runtime.shadow.lane=auto --set runtime.threads=1 --set runtime.shadow.threads=1 "
                               "--plan-step 11",
                           &out));
  const bool spare = omp_get_num_procs() >= 2;
  EXPECT_NE(out.find(spare ? host_op : compute_op), std::string::npos) << out;
  EXPECT_NE(out.find(spare ? "root jobs on the host workers" : "root jobs on the compute lane"), std::string::npos) << out;
}

TEST(Cli, BadInputExitsNonZeroWithMessage) {
  TempDir dir("cli");
  std::string cfg = dir.file("bad.yaml");
  { std::ofstream(cfg) << "model:\n  preset: tiny\ntrain:\n  stepz: 3\n"; }
  std::string out;
  EXPECT_EQ(1, run_command(kTrain + " --config " + cfg + " --dry-run", &out));
  EXPECT_NE(out.find(cfg + ":4: unknown key 'train.stepz'"), std::string::npos) << out;
  EXPECT_EQ(1, run_command(kTrain + " --config " + kConfigs + "/tiny-adamw.yaml --set optim.lr=abc --dry-run", &out));
  EXPECT_NE(out.find("--set optim.lr=abc"), std::string::npos) << out;
  EXPECT_EQ(1, run_command(kTrain + " --config " + dir.file("none.yaml"), &out));
  EXPECT_NE(out.find("none.yaml"), std::string::npos) << out;
  EXPECT_EQ(1, run_command(kTrain + " --config " + kConfigs + "/tiny-adamw.yaml --set data.train=" +
                               dir.file("nodata.bin") + " --set run.dir=" + dir.file("r"), &out));
  EXPECT_NE(out.find("nodata.bin"), std::string::npos) << out;
  EXPECT_NE(0, run_command(kTrain + " --bogus-flag", &out));
  EXPECT_EQ(0, run_command(kTrain + " --help", &out));
  EXPECT_NE(out.find("--print-plan"), std::string::npos);
}

// A two-step smoke run of a shipped recipe (warm-up 20 steps) runs, its warm-up clipped, and
// says so in one line.
TEST(Cli, ShortRunClipsTheWarmupAndSaysSo) {
  TempDir dir("cli-short");
  asteria::testing::write_bigram_tokens(dir.file("train.bin"), 40000, 512, 1);
  asteria::testing::write_bigram_tokens(dir.file("val.bin"), 8000, 512, 2);
  std::string out;
  ASSERT_EQ(0, run_command(kTrain + " --config " + kConfigs + "/tiny-soap.yaml --set train.steps=2 --set data.train=" +
                               dir.file("train.bin") + " --set data.eval=" + dir.file("val.bin") + " --set run.dir=" +
                               dir.file("run"), &out)) << out;
  EXPECT_NE(out.find("note: " + kConfigs + "/tiny-soap.yaml: train.warmup_steps 20 exceeds train.steps 2; the "
                     "warm-up is clipped to 2 steps"), std::string::npos) << out;
  EXPECT_NE(out.find("done: 2 steps"), std::string::npos) << out;
}

// A run over runtime.memory_limit is refused at startup with its bytes, before it writes
// anything; OLMo-1B SOAP in native mode (all state in memory: about 78 GiB at micro-batch 4) is
// over what this machine has.
TEST(Cli, ARunOverTheMemoryLimitIsRefusedWithTheBytes) {
  TempDir dir("cli-memory");
  asteria::testing::write_bigram_tokens(dir.file("train.bin"), 40000, 512, 1);
  const std::string tiny = kTrain + " --config " + kConfigs + "/tiny-soap.yaml --set train.steps=2 --set data.eval= " +
                           "--set data.train=" + dir.file("train.bin") + " --set run.dir=" + dir.file("run");
  std::string out;
  EXPECT_EQ(1, run_command(tiny + " --set runtime.memory_limit=1MiB", &out));
  EXPECT_NE(out.find("this run needs about "), std::string::npos) << out;
  EXPECT_NE(out.find("but may use 1.00 MiB (runtime.memory_limit 1MiB"), std::string::npos) << out;
  EXPECT_FALSE(std::filesystem::exists(dir.file("run") + "/metrics.jsonl")) << "refused before anything is written";
  ASSERT_EQ(0, run_command(tiny + " --set runtime.memory_limit=auto", &out)) << out;
  EXPECT_EQ(1, run_command(tiny + " --set runtime.memory_limit=lots --dry-run", &out));
  EXPECT_NE(out.find("runtime.memory_limit"), std::string::npos) << out;
  // The dry run shows the estimate and the limit it is held against.
  ASSERT_EQ(0, run_command(kTrain + " --config " + kConfigs + "/olmo-1b-soap.yaml --set runtime.memory_limit=24GiB --dry-run",
                           &out)) << out;
  EXPECT_NE(out.find("memory limit:     24.00 GiB  (runtime.memory_limit 24GiB"), std::string::npos) << out;
  // Every limit found is listed (MemAvailable at least, on Linux), and the disk tier's free space.
  EXPECT_NE(out.find("  MemAvailable  "), std::string::npos) << out;
  EXPECT_NE(out.find("disk tier:        "), std::string::npos) << out;
  // On a machine with less memory than native OLMo-1B SOAP needs, its start is refused.
  if (asteria::available_memory_bytes() < 70ull << 30) {
    EXPECT_EQ(1, run_command(kTrain + " --config " + kConfigs + "/olmo-1b-soap.yaml --set runtime.mode=native --set runtime.placement=manual --set data.train=" + dir.file("train.bin") +
                                 " --set data.eval= --set model.vocab_size=512 --set model.embedding_size=512 --set run.dir=" + dir.file("olmo"),
                             &out));
    EXPECT_NE(out.find("this run needs about "), std::string::npos) << out;
    EXPECT_NE(out.find("(runtime.memory_limit auto: "), std::string::npos) << out;
  }
}

// A value echoed by an error message is cut, with its length.
TEST(Cli, LongValuesAreCutInMessages) {
  std::string out;
  const std::string value(5000, '7');
  EXPECT_EQ(1, run_command(kTrain + " --config " + kConfigs + "/tiny-adamw.yaml --set optim.betas=" + value + " --dry-run", &out));
  EXPECT_NE(out.find("optim.betas"), std::string::npos) << out;
  EXPECT_NE(out.find("(5012 characters)"), std::string::npos) << out;   // the --set argument
  EXPECT_NE(out.find("(5000 characters)"), std::string::npos) << out;   // the value
  EXPECT_LT(out.size(), 600u) << out;
}

TEST(Cli, DryRunPrintsTheTierPlacement) {
  std::string out;
  ASSERT_EQ(0, run_command(kTrain + " --config " + kConfigs + "/tiny-soap.yaml --set runtime.tiers.device.bytes=4MiB "
                               "--set runtime.tiers.host.bytes=1MiB --set runtime.tiers.prefetch_distance=0 --dry-run", &out)) << out;
  EXPECT_NE(out.find("optimizer state placement"), std::string::npos) << out;
  for (const char* row : {"hot", "warm", "cold", "device:", "host:", "disk:"}) EXPECT_NE(out.find(row), std::string::npos) << row;
  EXPECT_NE(out.find("of budget 1048576 bytes"), std::string::npos) << out;
  // Too small for every tier: refused before anything runs, with the bytes each tier would need.
  EXPECT_EQ(1, run_command(kTrain + " --config " + kConfigs + "/tiny-soap.yaml --set runtime.tiers.device.bytes=4MiB "
                               "--set runtime.tiers.host.bytes=1MiB --set runtime.tiers.disk.bytes=1MiB --set runtime.tiers.prefetch_distance=0 --dry-run", &out));
  EXPECT_NE(out.find("runtime.tiers.disk.bytes to at least"), std::string::npos) << out;
  EXPECT_EQ(1, run_command(kTrain + " --config " + kConfigs + "/tiny-soap.yaml --set runtime.tiers.device.bytes=64KiB --dry-run", &out));
  EXPECT_NE(out.find("runtime.tiers.device.bytes is"), std::string::npos) << out;
}

TEST(Cli, PrintPlanShowsTierMoves) {
  std::string out;
  ASSERT_EQ(0, run_command(kTrain + " --config " + kConfigs + "/tiny-soap.yaml --set runtime.tiers.device.bytes=4MiB "
                               "--set runtime.tiers.host.bytes=1MiB --set runtime.tiers.prefetch_distance=0 --print-plan", &out)) << out;
  EXPECT_NE(out.find("tier_prefetch"), std::string::npos) << out;
  EXPECT_NE(out.find("tier_evict"), std::string::npos) << out;
  EXPECT_NE(out.find("tier_wait"), std::string::npos) << out;
  EXPECT_NE(out.find("disk->device"), std::string::npos) << out;
  EXPECT_NE(out.find("device->host"), std::string::npos) << out;
}

// Planning another world without MPI (tests/train/world_plan_test.cpp checks the figures).
TEST(Cli, DryRunAndPrintPlanForAnotherWorldSize) {
  std::string out;
  for (const char* w : {"8", "64"}) {
    ASSERT_EQ(0, run_command(kTrain + " --config " + kConfigs + "/olmo-1b-soap.yaml --dry-run --set distributed.world_size=" + w, &out)) << out;
    EXPECT_NE(out.find("# shard map (distributed.world_size " + std::string(w)), std::string::npos) << out;
    EXPECT_NE(out.find("# per-rank memory"), std::string::npos) << out;
    EXPECT_NE(out.find("# comm per step, per rank"), std::string::npos) << out;
  }
  ASSERT_EQ(0, run_command(kTrain + " --config " + kConfigs + "/tiny-soap.yaml --print-plan --set distributed.world_size=2", &out)) << out;
  EXPECT_NE(out.find("comm     gather        blocks.0"), std::string::npos) << out;
  EXPECT_NE(out.find("comm     reduce_scatter blocks.0"), std::string::npos) << out;
}
