// The CPU packages' RAPL counters (core/cpu/rapl_energy.hpp) on a powercap tree written here:
// package domains summed (subzones and other domains left out), a counter's wrap unwrapped, and
// each way of having none said; and this machine's verdict.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "core/cpu/rapl_energy.hpp"

using asteria::RaplEnergy;
namespace fs = std::filesystem;

namespace {

struct FakePowercap {
  fs::path root = fs::temp_directory_path() / ("asteria-powercap-" + std::to_string(::getpid()));
  FakePowercap() { fs::create_directories(root); }
  ~FakePowercap() { fs::remove_all(root); }
  void domain(const std::string& dir, const std::string& name, double energy_uj, double range_uj = 1000) {
    fs::create_directories(root / dir);
    std::ofstream(root / dir / "name") << name << "\n";
    std::ofstream(root / dir / "max_energy_range_uj") << range_uj << "\n";
    set(dir, energy_uj);
  }
  void set(const std::string& dir, double energy_uj) { std::ofstream(root / dir / "energy_uj") << energy_uj << "\n"; }
};

}  // namespace

TEST(RaplEnergy, SumsThePackagesAndUnwrapsTheirCounters) {
  FakePowercap pc;
  pc.domain("intel-rapl:0", "package-0", 100);
  pc.domain("intel-rapl:1", "package-1", 200);
  pc.domain("intel-rapl:0:0", "core", 50);      // a subzone: inside package-0's count
  pc.domain("intel-rapl:2", "psys", 900);       // the platform, not a package
  RaplEnergy e(pc.root.string());
  ASSERT_TRUE(e.available()) << e.why_not();
  EXPECT_DOUBLE_EQ(*e.joules(), 300e-6);
  pc.set("intel-rapl:0", 400);
  EXPECT_DOUBLE_EQ(*e.joules(), 600e-6);
  pc.set("intel-rapl:0", 50);                   // wrapped at 1000: 650 uj since the last reading
  EXPECT_DOUBLE_EQ(*e.joules(), 1250e-6);
  fs::remove(pc.root / "intel-rapl:1" / "energy_uj");
  EXPECT_FALSE(e.joules().has_value());         // a counter gone: no number, not a wrong one
}

TEST(RaplEnergy, SaysWhyThereIsNone) {
  RaplEnergy missing("/nonexistent/powercap");
  EXPECT_FALSE(missing.available());
  EXPECT_NE(missing.why_not().find("does not exist"), std::string::npos) << missing.why_not();
  EXPECT_FALSE(missing.joules().has_value());
  FakePowercap pc;
  pc.domain("intel-rapl:0", "psys", 5);
  RaplEnergy no_package(pc.root.string());
  EXPECT_FALSE(no_package.available());
  EXPECT_NE(no_package.why_not().find("no RAPL package domain"), std::string::npos) << no_package.why_not();
}

// This machine: a number where /sys/class/powercap has a package domain, else the reason.
TEST(RaplEnergy, ThisMachineGivesANumberOrTheReason) {
  RaplEnergy e;
  if (e.available()) {
    EXPECT_TRUE(e.joules().has_value());
  } else {
    EXPECT_FALSE(e.why_not().empty());
    std::cout << "RAPL: " << e.why_not() << "\n";
  }
}
