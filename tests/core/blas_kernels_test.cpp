// The BLAS kernels' check (core/cpu/blas_kernels.hpp): the choice as a pure function of the CPU,
// the library's choice and the environment, for the CPUs of the brief and the cases that must
// keep the library's choice; and CPUID against the kernel's /proc/cpuinfo on this machine.
#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "core/cpu/blas_kernels.hpp"

using asteria::BlasChoice;
using asteria::choose_blas_kernels;
using asteria::CpuFeatures;

namespace {

CpuFeatures cpu(const char* vendor, bool avx2, bool avx512, bool bf16) {
  CpuFeatures c;
  c.vendor = vendor;
  c.avx2 = c.fma = avx2;
  c.avx512 = avx512;
  c.avx512_bf16 = bf16;
  return c;
}

}  // namespace

TEST(BlasKernels, AFallbackOnACapableCpuSwitchesToTheBestSet) {
  struct Case {
    CpuFeatures cpu;
    const char* chosen;
    const char* want;
  };
  for (const Case& c : {Case{cpu("intel", true, false, false), "Prescott", "Haswell"},           // AVX2 Xeon
                        Case{cpu("intel", true, true, false), "Prescott", "SkylakeX"},           // AVX-512
                        Case{cpu("intel", true, true, true), "Prescott", "Cooperlake"},          // the Xeon 6/207 here
                        Case{cpu("intel", true, true, true), "Haswell", "Cooperlake"},           // a lesser set
                        Case{cpu("intel", true, true, false), "Sandybridge", "SkylakeX"},
                        Case{cpu("amd", true, false, false), "Prescott", "Zen"},                 // a Zen unknown to the table
                        Case{cpu("amd", true, true, true), "Zen", "Cooperlake"}}) {              // Zen 4
    SCOPED_TRACE(std::string(c.chosen) + " -> " + c.want);
    const BlasChoice b = choose_blas_kernels(c.cpu, c.chosen, nullptr, true);
    EXPECT_TRUE(b.switch_core) << b.reason;
    EXPECT_EQ(b.core, c.want);
  }
}

TEST(BlasKernels, TheLibrarysChoiceIsKeptWhereItIsRightOrSomeoneChose) {
  const CpuFeatures xeon = cpu("intel", true, true, true), zen = cpu("amd", true, false, false);
  // Right already.
  EXPECT_FALSE(choose_blas_kernels(zen, "Zen", nullptr, true).switch_core);
  EXPECT_FALSE(choose_blas_kernels(cpu("intel", true, false, false), "Haswell", nullptr, true).switch_core);
  EXPECT_FALSE(choose_blas_kernels(xeon, "Cooperlake", nullptr, true).switch_core);
  EXPECT_FALSE(choose_blas_kernels(xeon, "SapphireRapids", nullptr, true).switch_core);
  // OPENBLAS_CORETYPE set by the user or the system, even to Prescott or to nothing: never
  // overridden, and where the set in use is a lesser one the better set is named.
  for (const char* env : {"Prescott", "", "Haswell"}) {
    const BlasChoice b = choose_blas_kernels(xeon, "Prescott", env, true);
    EXPECT_FALSE(b.switch_core);
    EXPECT_NE(b.reason.find("OPENBLAS_CORETYPE is set"), std::string::npos) << b.reason;
    EXPECT_EQ(b.better_unused, "Cooperlake");
  }
  EXPECT_EQ(choose_blas_kernels(zen, "Haswell", "Haswell", true).better_unused, "");   // as good as Zen's
  EXPECT_EQ(choose_blas_kernels(xeon, "Cooperlake", "Cooperlake", true).better_unused, "");
  // runtime.blas as-is.
  const BlasChoice as_is = choose_blas_kernels(xeon, "Prescott", nullptr, false);
  EXPECT_FALSE(as_is.switch_core);
  EXPECT_EQ(as_is.better_unused, "Cooperlake");
  EXPECT_EQ(choose_blas_kernels(xeon, "Neoversev1", nullptr, false).better_unused, "");   // unknown: no claim
  // A set this check does not know, and a CPU without AVX2 or of another vendor.
  EXPECT_FALSE(choose_blas_kernels(xeon, "Neoversev1", nullptr, true).switch_core);
  EXPECT_FALSE(choose_blas_kernels(cpu("intel", false, false, false), "Prescott", nullptr, true).switch_core);
  EXPECT_FALSE(choose_blas_kernels(cpu("other", true, false, false), "Prescott", nullptr, true).switch_core);
}

TEST(BlasKernels, CpuidAgreesWithProcCpuinfo) {
  std::ifstream in("/proc/cpuinfo");
  std::set<std::string> flags;
  std::string vendor;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("vendor_id", 0) == 0) vendor = line.substr(line.find(':') + 2);
    if (line.rfind("flags", 0) == 0) {
      std::istringstream words(line.substr(line.find(':') + 1));
      for (std::string w; words >> w;) flags.insert(w);
      break;
    }
  }
  if (flags.empty()) GTEST_SKIP() << "no /proc/cpuinfo flags";
  const CpuFeatures c = asteria::detect_cpu();
  EXPECT_EQ(c.vendor, vendor == "GenuineIntel" ? "intel" : vendor == "AuthenticAMD" ? "amd" : "other");
  EXPECT_EQ(c.avx2, flags.count("avx2") == 1);
  EXPECT_EQ(c.fma, flags.count("fma") == 1);
  const bool avx512 = flags.count("avx512f") && flags.count("avx512cd") && flags.count("avx512bw") &&
                      flags.count("avx512dq") && flags.count("avx512vl");
  EXPECT_EQ(c.avx512, avx512);
  EXPECT_EQ(c.avx512_bf16, avx512 && flags.count("avx512_bf16") == 1);
}
