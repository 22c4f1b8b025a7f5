// --dry-run --set distributed.world_size=W against a real run of W ranks under mpirun
// (oversubscribed): the comm bytes per step it plans for rank 0 are the ones the run reports in
// metrics.jsonl (comm_bytes), in every distributed.fsdp mode; and a run whose
// distributed.world_size is its own number of ranks is accepted.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "test_util.hpp"
#include "config/config.hpp"
#include "train/estimates/world_plan.hpp"

using asteria::testing::run_command;
using asteria::testing::kConfigs;
using asteria::testing::kMpirun;
using asteria::testing::kTrain;
using asteria::testing::TempDir;


TEST(WorldPlanRun, PlannedCommBytesAreTheRunsInEveryMode) {
  TempDir dir("world-plan-run");
  asteria::testing::write_bigram_tokens(dir.file("train.bin"), 40000, 512, 3);
  struct Case {
    int world;
    const char* fsdp;
  };
  for (const Case& c : {Case{2, "full"}, Case{4, "full"}, Case{4, "hybrid"}, Case{2, "none"}}) {
    SCOPED_TRACE(std::to_string(c.world) + " ranks, fsdp " + c.fsdp);
    const std::vector<std::string> sets = {"distributed.world_size=" + std::to_string(c.world),
                                           std::string("distributed.fsdp=") + c.fsdp, "distributed.ranks_per_node=2"};
    const std::string run = dir.file(std::string("run-") + std::to_string(c.world) + c.fsdp);
    std::string cmd = kMpirun + "-np " + std::to_string(c.world) + " " + kTrain + " --config " +
                      kConfigs + "/tiny-soap.yaml --set data.train=" + dir.file("train.bin") +
                      " --set data.eval= --set train.steps=2 --set train.micro_batch=2 --set checkpoint.enabled=false" +
                      " --set run.dir=" + run;
    for (const std::string& s : sets) cmd += " --set " + s;
    std::string out;
    ASSERT_EQ(0, run_command(cmd, &out)) << out;
    std::ifstream in(run + "/metrics.jsonl");
    std::string line, last;
    while (std::getline(in, line)) last = line;
    const nlohmann::json rec = nlohmann::json::parse(last);
    const asteria::WorldPlan plan =
        asteria::plan_world(asteria::load_config(kConfigs + "/tiny-soap.yaml", sets));
    EXPECT_EQ(rec.at("comm_bytes").at("shard_group").get<size_t>(), plan.ranks[0].comm.group) << last;
    EXPECT_EQ(rec.at("comm_bytes").at("replicas").get<size_t>(), plan.ranks[0].comm.replicas) << last;
  }
}
