// Replicated second-order state under the threads users run (ctest -L stress): 20 launches of
// tiny SOAP / Shampoo / KL-Shampoo in asteria mode under real mpirun with each rank's default
// threads (4 ranks oversubscribed on 2 cores: 2 OpenMP threads each), at W = 2, 3 and 4, fsdp
// none and hybrid, the shadow pipeline's host workers and its compute-lane parts, slow workers
// and a stalled coherence message. Each resumes a one-rank checkpoint of step 6 through warm-up
// refreshes (runtime.shadow.sync_steps 9: versions exchanged at their refresh points, on the
// compute lane) and delayed ones (steps 10-16: exchanged by coherence_sync ops on the comm lane).
// Asserted: the replicas are bit-identical at every step (distributed.check_every 1: the trainer
// fails the run otherwise), and the losses are those of one rank on one thread (the same global
// batch) as closely as rounding allows. The tolerance is measured, per optimizer, in the same
// run: 4x the largest relative difference between the one-rank run on one thread and runs that
// change nothing but rounding, at least 1e-6: the default threads (BLAS may round differently on
// another number of threads; on some kernels it does not) and the global batch accumulated over
// two, three and four micro-batches (the gradient summed in another order, as the ranks'
// reduction sums it, over GEMMs of the ranks' micro-batch sizes), and the GEMMs on the other
// library (runtime.gemm openblas: their sums in another order). Rounding moves SOAP's losses ~1e-5 over these steps, KL-Shampoo's ~1e-9 and
// Shampoo's ~1e-3 (its inverse 4th roots of nearly singular factors amplify it).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "test_util.hpp"

using asteria::testing::kConfigs;
using asteria::testing::kMpirun;
using asteria::testing::kTrain;
using asteria::testing::losses;
using asteria::testing::run_command;
using asteria::testing::TempDir;
using asteria::testing::worst_relative;

namespace {

constexpr int kGlobalBatch = 12;   // divisible by 1, 2, 3 and 4 ranks
constexpr int kStart = 6, kSteps = 16;

struct Launch {
  const char* optim;
  int ranks;
  const char* fsdp;    // none, or hybrid in nodes of 2 ranks
  const char* lane;    // workers or compute
  const char* extra;   // more --set, or an environment prefix after '|'
};

class ReplicaStress : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir("replica-stress");
    asteria::testing::write_bigram_tokens(dir_->file("train.bin"), 60000, 512, 5);
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  static std::string common(const std::string& optim, int ranks) {
    return " --config " + kConfigs + "/tiny-soap.yaml --set optim.name=" + optim + " --set data.train=" +
           dir_->file("train.bin") + " --set data.eval= --set train.warmup_steps=2 --set train.steps=" +
           std::to_string(kSteps) + " --set train.micro_batch=" + std::to_string(kGlobalBatch / ranks) +
           " --set optim.precondition_frequency=2 --set runtime.mode=asteria --set runtime.shadow.delay=2"
           " --set runtime.shadow.sync_steps=9 --set distributed.check_every=1"
           " --set checkpoint.allow_changes=[train.micro_batch] ";
  }
  // The one-rank run to step kStart (the checkpoint every launch resumes), once per optimizer.
  static const std::string& start(const std::string& optim) {
    static std::map<std::string, std::string> made;
    auto it = made.find(optim);
    if (it != made.end()) return it->second;
    const std::string run = dir_->file("start-" + optim);
    std::string out;
    EXPECT_EQ(0, run_command(kTrain + common(optim, 1) + "--set run.dir=" + run + " --set run.overwrite=true "
                                 "--set train.stop_after=" + std::to_string(kStart),
                             &out))
        << out;
    return made[optim] = run;
  }
  // A copy of the start resumed by `launcher` (empty: one rank, no mpirun).
  static std::string resume(const std::string& optim, int ranks, const std::string& name, const std::string& env,
                            const std::string& sets, std::string* out) {
    const std::string run = dir_->file(name);
    std::filesystem::remove_all(run);
    std::filesystem::copy(start(optim), run, std::filesystem::copy_options::recursive);
    const std::string launcher = ranks == 1 ? env : env + " " + kMpirun + "-np " + std::to_string(ranks) + " ";
    const int rc = run_command(launcher + kTrain + common(optim, ranks) + "--set run.dir=" + run + " --resume latest " + sets, out);
    EXPECT_EQ(rc, 0) << *out;
    return run;
  }
  // One rank on one thread: the losses every launch of the optimizer must give, and how far
  // they may be off (the header).
  struct Reference {
    std::vector<double> losses;
    double tolerance = 0;
  };
  static const Reference& reference(const std::string& optim) {
    static std::map<std::string, Reference> made;
    auto it = made.find(optim);
    if (it != made.end()) return it->second;
    std::string out;
    Reference& ref = made[optim];
    ref.losses = losses(resume(optim, 1, "ref-" + optim, "", "--set runtime.threads=1", &out));
    const std::vector<double> threads = losses(resume(optim, 1, "ref-threads-" + optim, "", "", &out));
    EXPECT_EQ(ref.losses.size(), threads.size());
    const double by_threads = worst_relative(ref.losses, threads);
    // The global batch over 2, 3 and 4 micro-batches (the micro-batch sizes the ranks run, whose
    // GEMM shapes a library may block, and so round, differently), and each of these and the
    // reference on the other GEMM library (runtime.gemm openblas: the same sums in other orders).
    double by_accum = 0, by_library = 0;
    for (const char* gemm : {"auto", "openblas"})
      for (int parts : {1, 2, 3, 4}) {
        if (parts == 1 && std::string(gemm) == "auto") continue;   // the reference itself
        const std::vector<double> l =
            losses(resume(optim, 1, "ref-" + std::string(gemm) + std::to_string(parts) + "-" + optim, "",
                          "--set runtime.threads=1 --set runtime.gemm=" + std::string(gemm) +
                              " --set train.micro_batch=" + std::to_string(kGlobalBatch / parts) +
                              " --set train.grad_accum=" + std::to_string(parts) +
                              " --set checkpoint.allow_changes=[train.micro_batch,train.grad_accum]",
                          &out));
        EXPECT_EQ(ref.losses.size(), l.size());
        double& worst = parts == 1 ? by_library : by_accum;
        worst = std::max(worst, worst_relative(ref.losses, l));
      }
    ref.tolerance = std::max(1e-6, 4 * std::max({by_threads, by_accum, by_library}));
    std::printf("%s: one rank, 1 vs default threads: %.3g relative, 1 vs 2, 3, 4 micro-batches (either library): "
                "%.3g, oneDNN vs OpenBLAS: %.3g; tolerance %.3g\n",
                optim.c_str(), by_threads, by_accum, by_library, ref.tolerance);
    return ref;
  }
  static TempDir* dir_;
};

TempDir* ReplicaStress::dir_ = nullptr;

}  // namespace

TEST_F(ReplicaStress, TwentyLaunchesKeepBitIdenticalReplicasAndTheOneThreadLosses) {
  const std::vector<Launch> launches = {
      {"soap", 2, "none", "compute", ""},
      {"soap", 3, "none", "compute", ""},
      {"soap", 4, "none", "compute", ""},
      {"soap", 4, "none", "compute", ""},
      {"soap", 3, "none", "workers", ""},
      {"soap", 4, "none", "workers", ""},
      {"soap", 4, "hybrid", "compute", ""},
      {"soap", 4, "hybrid", "workers", "--set runtime.coherence.hierarchical=false"},
      // Slow workers: every refresh finishes late, so the publishes wait at their barriers.
      {"soap", 4, "none", "workers", "--set runtime.shadow.worker_delay_ms=40"},
      // A stalled coherence message: rank 1 sleeps 2 s before its first exchange of a version.
      {"soap", 4, "none", "compute", "|ASTERIA_FAULT_STALL='1:version of:2'"},
      {"soap", 3, "hybrid", "compute", "--set distributed.ranks_per_node=1"},
      {"shampoo", 2, "none", "compute", ""},
      {"shampoo", 3, "none", "workers", ""},
      {"shampoo", 4, "none", "compute", ""},
      {"shampoo", 4, "hybrid", "workers", ""},
      {"kl_shampoo", 2, "none", "workers", ""},
      {"kl_shampoo", 3, "none", "compute", ""},
      {"kl_shampoo", 4, "none", "compute", ""},
      {"kl_shampoo", 4, "none", "workers", ""},
      {"kl_shampoo", 4, "hybrid", "compute", ""},
  };
  int i = 0;
  for (const Launch& l : launches) {
    const std::string extra = l.extra, env = extra.rfind('|', 0) == 0 ? extra.substr(1) : "",
                      sets = env.empty() ? extra : "";
    const std::string what = std::string(l.optim) + " W=" + std::to_string(l.ranks) + " fsdp " + l.fsdp + ", lane " +
                             l.lane + " " + extra;
    SCOPED_TRACE(what);
    std::string fsdp = std::string("--set distributed.fsdp=") + l.fsdp;
    if (std::string(l.fsdp) == "hybrid" && sets.find("ranks_per_node") == std::string::npos)
      fsdp += " --set distributed.ranks_per_node=2";
    std::string out;
    const std::string run = resume(l.optim, l.ranks, "run" + std::to_string(i++), env,
                                   fsdp + " --set runtime.shadow.lane=" + l.lane + " " + sets, &out);
    const std::vector<double> got = losses(run);
    const Reference& want = reference(l.optim);
    ASSERT_EQ(got.size(), static_cast<size_t>(kSteps)) << out;
    ASSERT_EQ(want.losses.size(), static_cast<size_t>(kSteps));
    EXPECT_LT(worst_relative(want.losses, got), want.tolerance) << out;
  }
}
