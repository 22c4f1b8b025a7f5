// Resume wherever placement lands (docs/checkpoints.md "Config changes on resume"): a run
// checkpointed with plenty of memory resumes under a limit where runtime.placement splits the
// micro-batch (the global batch kept) and chooses its tiers, head chunk and shadow settings again,
// then resumes with plenty again; neither resume is refused, each says what it changed, and the
// losses follow the straight run (the same bits up to the first resume; the micro-batch split
// changes the gradient sums' rounding only).
#include <gtest/gtest.h>

#include <fstream>

#include "train/estimates/placement.hpp"
#include "trainer_runs.hpp"
#include "../train/estimates/tier_floor.hpp"

using namespace asteria;
using namespace asteria::testing;

namespace {

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST(ResumePlacement, PlentifulToTightAndBackResumesAndSaysWhatChanged) {
  TempDir dir("resume-placement");
  write_bigram_tokens(dir.file("train.bin"), 20000, 512, 3);
  const std::string yaml = "seed: 9\nmodel:\n  preset: tiny\n  n_layers: 6\n";
  std::ofstream(dir.file("c.yaml")) << yaml;
  std::vector<std::string> sets = short_second_order_sets(dir, "soap", 9);
  sets.push_back("checkpoint.every=3");
  // The largest limit at which placement splits the micro-batch, for the resumed config: it keeps
  // the checkpoint's shadow delay and sync steps (fixed keys it does not give).
  Config cfg = load_config_text(yaml, "c.yaml", sets);
  cfg.given.insert({"runtime.shadow.delay", "runtime.shadow.sync_steps"});
  const double all = process_memory(cfg).total();
  uint64_t tight = 0;
  for (double f = 1.0; f > 0.02 && tight == 0; f *= 0.98) {
    const uint64_t limit = static_cast<uint64_t>(f * all);
    try {
      const Placement p = choose_placement(cfg, one_process_inputs(limit));
      if (p.cfg.train.micro_batch < cfg.train.micro_batch) tight = limit;
    } catch (const Error&) {
      break;   // nothing fits any more
    }
  }
  ASSERT_GT(tight, 0u) << "no limit splits the micro-batch";

  std::string args;
  for (const std::string& s : sets) args += " --set " + s;
  auto train = [&](const std::string& run, const std::string& extra, std::string* log) {
    std::string a = args;
    a.replace(a.find("run.dir=" + dir.file("run")), ("run.dir=" + dir.file("run")).size(), "run.dir=" + dir.file(run));
    return run_command(kTrain + " --config " + dir.file("c.yaml") + a + extra, log);
  };
  std::string log;
  ASSERT_EQ(train("straight", "", &log), 0) << log;
  ASSERT_EQ(train("run", " --set train.stop_after=3", &log), 0) << log;
  // Onto a machine with far less memory: placed again, resumed, said.
  ASSERT_EQ(train("run", " --set train.stop_after=6 --set runtime.memory_limit=" + std::to_string(tight) + " --resume latest",
                  &log), 0) << log;
  EXPECT_TRUE(has(log, "resuming with this machine's placement, which changes the arithmetic, not the run")) << log;
  EXPECT_TRUE(has(log, "train.micro_batch: 4 -> ")) << log;
  EXPECT_TRUE(has(log, "train.grad_accum: 1 -> ")) << log;
  EXPECT_TRUE(has(log, "resuming from")) << log;
  // And back onto plenty.
  ASSERT_EQ(train("run", " --resume latest", &log), 0) << log;
  EXPECT_TRUE(has(log, "-> 4")) << log;
  const std::vector<double> straight = losses(dir.file("straight")), resumed = losses(dir.file("run"));
  ASSERT_EQ(resumed.size(), 9u);
  for (int s = 0; s < 3; s++) EXPECT_EQ(resumed[s], straight[s]) << "step " << s + 1;
  EXPECT_LT(worst_relative(straight, resumed), 5e-4);
  std::printf("straight vs resumed across placements: %.3g relative\n", worst_relative(straight, resumed));
}

TEST(ResumePlacement, AGlobalBatchThatWouldChangeIsRefusedNamingIt) {
  TempDir dir("resume-batch");
  write_bigram_tokens(dir.file("train.bin"), 20000, 512, 3);
  std::ofstream(dir.file("c.yaml")) << "seed: 9\nmodel:\n  preset: tiny\n";
  std::string args;
  for (const std::string& s : short_second_order_sets(dir, "adamw", 6)) args += " --set " + s;
  std::string log;
  ASSERT_EQ(run_command(kTrain + " --config " + dir.file("c.yaml") + args + " --set train.stop_after=3", &log), 0) << log;
  // A fixed key given with another value, and a micro-batch that changes the global batch.
  EXPECT_EQ(run_command(kTrain + " --config " + dir.file("c.yaml") + args + " --set optim.lr=5e-3 --resume latest", &log), 1)
      << log;
  EXPECT_TRUE(has(log, "optim.lr: 0.01 in the checkpoint, 0.005 now")) << log;
  EXPECT_EQ(run_command(kTrain + " --config " + dir.file("c.yaml") + args + " --set train.micro_batch=2 --resume latest", &log), 1)
      << log;
  EXPECT_TRUE(has(log, "its global batch is 4 instances per step but this launch's is 2")) << log;
  // The same global batch in two micro-batches is placement's kind of change: accepted, said.
  EXPECT_EQ(run_command(kTrain + " --config " + dir.file("c.yaml") + args +
                            " --set train.micro_batch=2 --set train.grad_accum=2 --resume latest", &log), 0)
      << log;
  EXPECT_TRUE(has(log, "train.micro_batch: 4 -> 2")) << log;
}
