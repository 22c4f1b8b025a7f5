// runtime.blas end to end (core/cpu/blas_kernels.hpp), on whatever CPU this is: asteria-train
// told that the library chose the Prescott fallback (ASTERIA_BLAS_TEST_CHOSEN, the stand-in for
// a CPU missing from OpenBLAS's table) self-checks the best set for this CPU, re-executes itself
// with it, says so in one line, reports it in run_info.json, caches the verdict, and trains to the
// losses of the run that kept the library's kernels (within fp32 rounding: the kernels differ).
// A self-check that fails keeps the fallback; OPENBLAS_CORETYPE set and runtime.blas as-is are
// never overridden, and where they keep a lesser set than the CPU's best the line names it.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "core/cpu/blas_kernels.hpp"
#include "test_util.hpp"

using asteria::testing::kConfigs;
using asteria::testing::kTrain;
using asteria::testing::losses;
using asteria::testing::run_command;
using asteria::testing::TempDir;
using asteria::testing::worst_relative;

namespace {

class BlasKernelsRun : public ::testing::Test {
 protected:
  void SetUp() override {
    best_ = asteria::best_blas_core(asteria::detect_cpu());
    if (best_.empty()) GTEST_SKIP() << "no AVX2 kernel set for this CPU";
    asteria::testing::write_bigram_tokens(dir_.file("train.bin"), 20000, 512, 2);
  }
  // asteria-train with `env` before it; run.dir = dir_/run.
  int train(const std::string& env, const std::string& run, const std::string& extra, std::string* out) {
    return run_command("env -u OPENBLAS_CORETYPE XDG_CACHE_HOME=" + dir_.file("cache") + " " + env + " " + kTrain +
                           " --config " + kConfigs + "/tiny-soap.yaml --set data.train=" + dir_.file("train.bin") +
                           " --set data.eval= --set train.steps=6 --set checkpoint.enabled=false --set run.dir=" +
                           dir_.file(run) + " " + extra,
                       out);
  }
  std::string kernels(const std::string& run) {
    return nlohmann::json::parse(std::ifstream(dir_.file(run) + "/run_info.json"))["blas"]["openblas_corename"];
  }
  TempDir dir_{"blas-kernels"};
  std::string best_;
};

}  // namespace

TEST_F(BlasKernelsRun, AFallbackIsSwitchedAfterASelfCheckWithTheSameLosses) {
  std::string out;
  ASSERT_EQ(0, train("", "as-is", "--set runtime.blas=as-is", &out)) << out;
  const std::string library = kernels("as-is");
  ASSERT_EQ(0, train("ASTERIA_BLAS_TEST_CHOSEN=Prescott", "auto", "", &out)) << out;
  EXPECT_NE(out.find("asteria: BLAS kernels: OpenBLAS chose Prescott, a fallback for this CPU"), std::string::npos) << out;
  EXPECT_NE(out.find("running with OPENBLAS_CORETYPE=" + best_ + " (self-checked"), std::string::npos) << out;
  EXPECT_EQ(kernels("auto"), best_);
  EXPECT_LT(worst_relative(losses(dir_.file("as-is")), losses(dir_.file("auto"))), 1e-4) << library << " vs " << best_;
  // The verdict is cached: the second start needs no self-check.
  std::ifstream cache(dir_.file("cache") + "/asteria/blas-kernels");
  std::string line;
  ASSERT_TRUE(std::getline(cache, line));
  EXPECT_NE(line.find("|" + best_ + "\tok"), std::string::npos) << line;
}

TEST_F(BlasKernelsRun, AFailedSelfCheckKeepsTheFallbackAndSetValuesAreNeverOverridden) {
  std::string out;
  ASSERT_EQ(0, train("ASTERIA_BLAS_TEST_CHOSEN=Prescott ASTERIA_BLAS_TEST_BREAK=1", "broken", "", &out)) << out;
  EXPECT_NE(out.find(best_ + " failed its self-check (its results differ from the fallback kernels'): keeping Prescott"),
            std::string::npos)
      << out;
  EXPECT_EQ(out.find("running with OPENBLAS_CORETYPE"), std::string::npos) << out;
  // runtime.blas as-is: no switch; the line says the fallback is kept and names the better set.
  ASSERT_EQ(0, train("ASTERIA_BLAS_TEST_CHOSEN=Prescott", "as-is", "--set runtime.blas=as-is", &out)) << out;
  EXPECT_NE(out.find("asteria: BLAS kernels: runtime.blas as-is: keeping Prescott, though this CPU"), std::string::npos) << out;
  EXPECT_NE(out.find(" supports the faster " + best_ + " kernels"), std::string::npos) << out;
  EXPECT_EQ(out.find("running with OPENBLAS_CORETYPE"), std::string::npos) << out;
  // OPENBLAS_CORETYPE set (here to the fallback, as a user or a system could): never overridden,
  // and the line names the better set; set to the CPU's best: no line.
  ASSERT_EQ(0, train("OPENBLAS_CORETYPE=Prescott", "set", "--set train.steps=2", &out)) << out;
  EXPECT_NE(out.find("asteria: BLAS kernels: OPENBLAS_CORETYPE is set ('Prescott'): keeping Prescott, though this CPU"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find(" supports the faster " + best_ + " kernels"), std::string::npos) << out;
  EXPECT_EQ(kernels("set"), "Prescott");
  ASSERT_EQ(0, train("OPENBLAS_CORETYPE=" + best_, "set-best", "--set train.steps=2", &out)) << out;
  EXPECT_EQ(out.find("asteria: BLAS kernels"), std::string::npos) << out;
}
