// The coherence protocol in asteria-train under real mpirun (oversubscribed on 2 cores), tiny
// SOAP in asteria mode resumed from one rank's checkpoint at step 8 (see multi_rank_test.cpp for
// why SOAP starts from one), replicas checked bit-identical every step:
//   S = 1 (synchronous replication) in fsdp none and hybrid: the losses of one rank within 1e-5
//   relative, and each block refreshed on one replica only (the ranks' refresh counts sum to one
//   rank's);
//   S = 3 with a tolerance: the same bits whatever the host workers' number and speed, and runs
//   stopped and resumed from a checkpoint (refreshes in flight; dropped versions kept) equal the
//   uninterrupted one;
//   hierarchical and flat shipping: the same bits; between nodes hierarchical sends 1 /
//   ranks_per_node of flat's bytes in fsdp none, the same in hybrid (one replica per node).
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "test_util.hpp"

using asteria::testing::kConfigs;
using asteria::testing::kMpirun;
using asteria::testing::kTrain;
using asteria::testing::losses;
using asteria::testing::metrics_lines;
using asteria::testing::run_command;
using asteria::testing::TempDir;
using asteria::testing::worst_relative;

namespace {

class Coherence : public ::testing::Test {
 protected:
  void SetUp() override {
    asteria::testing::write_bigram_tokens(dir_.file("train.bin"), 40000, 512, 3);
    const std::string out = start("start", "");
    ASSERT_TRUE(std::filesystem::exists(dir_.file("start") + "/checkpoints/step00000008/manifest.json")) << out;
  }
  std::string common(int ranks) const {
    return " --config " + kConfigs + "/tiny-soap.yaml --set data.train=" + dir_.file("train.bin") +
           " --set data.eval= --set train.warmup_steps=2 --set train.micro_batch=" + std::to_string(8 / ranks) +
           " --set train.steps=20 --set runtime.mode=asteria --set runtime.stagger=false --set runtime.shadow.delay=2 "
           "--set distributed.check_every=1 --set checkpoint.allow_changes=[train.micro_batch,runtime.coherence,optim.precondition_frequency] ";
  }
  // One rank to step 8 with a checkpoint there.
  std::string start(const std::string& run, const std::string& extra) {
    std::string out;
    EXPECT_EQ(0, run_command(kTrain + common(1) + "--set run.dir=" + dir_.file(run) +
                                 " --set train.stop_after=8 --set run.overwrite=true " + extra,
                             &out))
        << out;
    return out;
  }
  // A copy of the start, resumed at `ranks` ranks with `extra`.
  std::string resume(int ranks, const std::string& run, const std::string& extra) {
    std::filesystem::remove_all(dir_.file(run));
    std::filesystem::copy(dir_.file("start"), dir_.file(run), std::filesystem::copy_options::recursive);
    const std::string launcher = ranks == 1 ? "" : kMpirun + "-np " + std::to_string(ranks) + " ";
    std::string out;
    EXPECT_EQ(0, run_command(launcher + kTrain + common(ranks) + "--set run.dir=" + dir_.file(run) +
                                 " --resume latest " + extra,
                             &out))
        << out;
    return out;
  }
  // Sums over the steps of a run of a per-step number.
  double total(const std::string& run, const char* key) {
    double s = 0;
    for (const auto& r : metrics_lines(dir_.file(run)))
      if (r.contains(key)) s += r.at(key).get<double>();
    return s;
  }
  TempDir dir_{"coherence"};
};

}  // namespace

TEST_F(Coherence, SynchronousReplicationMatchesOneRankAndRefreshesEachBlockOnce) {
  resume(1, "one", "--set optim.precondition_frequency=5");
  const std::vector<double> one = losses(dir_.file("one"));
  ASSERT_EQ(one.size(), 20u);
  // The refreshes computed by step 19 (those opened at 10 and 15; 20's may still be running).
  const auto computed = [&](const std::string& run) {
    return metrics_lines(dir_.file(run)).at(18).at("shadow_computed_by_rank").get<std::vector<double>>();
  };
  const double refreshes = computed("one").at(0);
  ASSERT_GT(refreshes, 0);
  for (const auto& [ranks, mode] : std::vector<std::pair<int, std::string>>{
           {2, "--set distributed.fsdp=none --set distributed.ranks_per_node=1"},
           {4, "--set distributed.fsdp=none --set distributed.ranks_per_node=2"},
           {4, "--set distributed.fsdp=hybrid --set distributed.ranks_per_node=2"}}) {
    SCOPED_TRACE(std::to_string(ranks) + " ranks, " + mode);
    const std::string run = "w" + std::to_string(ranks) + (mode.find("hybrid") != std::string::npos ? "h" : "n");
    const std::string out = resume(ranks, run, "--set optim.precondition_frequency=5 " + mode);
    const std::vector<double> l = losses(dir_.file(run));
    ASSERT_EQ(l.size(), 20u) << out;
    EXPECT_LT(worst_relative(one, l), 1e-5);
    const std::vector<double> per_rank = computed(run);
    double sum = 0;
    for (double c : per_rank) {
      EXPECT_LT(c, refreshes) << "a rank computed every block's refresh";
      sum += c;
    }
    EXPECT_EQ(sum, refreshes) << "each block is refreshed on one replica of its replica group";
    EXPECT_GT(total(run, "coherence_shipped_blocks"), 0) << out;
    EXPECT_EQ(total(run, "coherence_skipped_versions"), 0);   // S = 1 ships every version
  }
}

TEST_F(Coherence, StaleVersionsGiveTheSameBitsWhateverTheWorkersAndAcrossAResume) {
  const std::string s3 = "--set optim.precondition_frequency=3 --set runtime.coherence.staleness=3 "
                         "--set runtime.coherence.tolerance=0.4 --set distributed.fsdp=none "
                         "--set distributed.ranks_per_node=1 --set runtime.shadow.lane=workers --set train.steps=28 ";
  resume(2, "a", s3 + "--set runtime.shadow.threads=1");
  resume(2, "b", s3 + "--set runtime.shadow.threads=2 --set runtime.shadow.worker_delay_ms=30");
  const std::vector<double> a = losses(dir_.file("a"));
  ASSERT_EQ(a.size(), 28u);
  EXPECT_EQ(a, losses(dir_.file("b")));
  EXPECT_GT(total("a", "coherence_skipped_versions"), 0);   // S = 3 drops versions
  EXPECT_GT(total("a", "coherence_shipped_blocks"), 0);
  // The versions' changes, which the tolerance compares: reported on the steps that decide some.
  int with_changes = 0;
  for (const auto& r : metrics_lines(dir_.file("a")))
    if (r.contains("coherence_change")) {
      ++with_changes;
      EXPECT_GE(r["coherence_change"]["max"].get<double>(), r["coherence_change"]["mean"].get<double>());
      EXPECT_GT(r["coherence_change"]["mean"].get<double>(), 0);
    }
  EXPECT_GT(with_changes, 0);
  // Stopped and resumed: at 17, with the refreshes opened at 16 in flight and the registry
  // mid-count; at 18, with the versions dropped there kept for the refreshes opened at 19, which
  // continue from them (F = 3 > D = 2, so the kept versions cross the checkpoint).
  for (const int stop : {17, 18}) {
    SCOPED_TRACE("stopped at " + std::to_string(stop));
    resume(2, "c", s3 + "--set runtime.shadow.threads=1 --set train.stop_after=" + std::to_string(stop));
    std::string out;
    ASSERT_EQ(0, run_command(kMpirun + "-np 2 " + kTrain + common(2) + "--set run.dir=" +
                                 dir_.file("c") + " --resume latest " + s3 + "--set runtime.shadow.threads=1",
                             &out))
        << out;
    EXPECT_EQ(losses(dir_.file("c")), a);
  }
}

TEST_F(Coherence, HierarchicalShipsOncePerNodeWithTheSameBits) {
  for (const char* mode : {"none", "hybrid"}) {
    SCOPED_TRACE(mode);
    const std::string m = std::string("--set optim.precondition_frequency=5 --set distributed.ranks_per_node=2 "
                                      "--set distributed.fsdp=") + mode;
    resume(4, "hier", m);
    resume(4, "flat", m + " --set runtime.coherence.hierarchical=false");
    EXPECT_EQ(losses(dir_.file("hier")), losses(dir_.file("flat")));
    const double hier = total("hier", "coherence_bytes_inter"), flat = total("flat", "coherence_bytes_inter");
    ASSERT_GT(flat, 0);
    // none: 2 nodes of 2 replicas, so flat sends each version twice between the nodes; hybrid:
    // one replica per node, both send it once.
    EXPECT_EQ(hier * (std::string(mode) == "none" ? 2 : 1), flat);
  }
}
