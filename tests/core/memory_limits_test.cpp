// find_memory_limits on fake /proc and /sys trees: each source read, the tightest cgroup level,
// "no limit" left out, the binding source per process, and RLIMIT_AS per process.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "core/memory_limits.hpp"

namespace asteria {
namespace {

namespace fs = std::filesystem;

class FakeRoot {
 public:
  FakeRoot() : dir_(fs::temp_directory_path() / ("memory-limits-" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "-" +
                                                  ::testing::UnitTest::GetInstance()->current_test_info()->name())) {
    fs::remove_all(dir_);
  }
  ~FakeRoot() { fs::remove_all(dir_); }
  void write(const std::string& rel, const std::string& text) const {
    const fs::path p = dir_ / rel;
    fs::create_directories(p.parent_path());
    std::ofstream(p) << text;
  }
  MemoryProbe probe(std::optional<uint64_t> as = UINT64_MAX) const { return {dir_.string(), as}; }

 private:
  fs::path dir_;
};

constexpr uint64_t GiB = uint64_t{1} << 30;

TEST(MemoryLimits, MemAvailableAloneOnAMachineWithoutLimits) {
  FakeRoot r;
  r.write("proc/meminfo", "MemTotal:       25165824 kB\nMemFree: 100 kB\nMemAvailable:   20971520 kB\nHugePages_Total: 0\n");
  r.write("proc/self/cgroup", "0::/user.slice\n");
  r.write("sys/fs/cgroup/user.slice/memory.max", "max\n");
  const MemoryLimits m = find_memory_limits(r.probe());
  ASSERT_EQ(m.sources.size(), 1u);
  EXPECT_EQ(m.sources[0].name, "MemAvailable");
  EXPECT_EQ(m.sources[0].bytes, 20 * GiB);
  ASSERT_NE(m.binding(1), nullptr);
  EXPECT_EQ(m.per_process(*m.binding(2), 2), 10 * GiB);   // shared by two ranks
}

TEST(MemoryLimits, ASlurmJobsCgroupV2BindsWithItsTightestLevelLessWhatItUses) {
  FakeRoot r;
  r.write("proc/meminfo", "MemAvailable:   20971520 kB\n");
  r.write("proc/self/cgroup", "0::/system.slice/slurmstepd.scope/job_7/step_0\n");
  // The job's --mem=8G, its step unlimited, 1 GiB already used in the job.
  r.write("sys/fs/cgroup/system.slice/slurmstepd.scope/job_7/memory.max", std::to_string(8 * GiB) + "\n");
  r.write("sys/fs/cgroup/system.slice/slurmstepd.scope/job_7/memory.current", std::to_string(1 * GiB) + "\n");
  r.write("sys/fs/cgroup/system.slice/slurmstepd.scope/job_7/step_0/memory.max", "max\n");
  r.write("sys/fs/cgroup/system.slice/slurmstepd.scope/job_7/step_0/memory.current", "0\n");
  const MemoryLimits m = find_memory_limits(r.probe());
  ASSERT_EQ(m.sources.size(), 2u);
  const MemorySource* b = m.binding(1);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->name, "cgroup v2");
  EXPECT_EQ(b->bytes, 7 * GiB);
  EXPECT_NE(b->where.find("job_7/memory.max"), std::string::npos) << b->where;
}

TEST(MemoryLimits, CgroupV1ReadsTheMemoryControllerAndIgnoresItsNoLimitValue) {
  FakeRoot r;
  r.write("proc/meminfo", "MemAvailable:   20971520 kB\n");
  r.write("proc/self/cgroup", "12:cpu,cpuacct:/job\n11:memory:/job\n0::/\n");
  r.write("sys/fs/cgroup/memory/job/memory.limit_in_bytes", std::to_string(4 * GiB) + "\n");
  r.write("sys/fs/cgroup/memory/job/memory.usage_in_bytes", std::to_string(GiB / 2) + "\n");
  r.write("sys/fs/cgroup/memory/memory.limit_in_bytes", "9223372036854771712\n");   // the root: no limit
  const MemoryLimits m = find_memory_limits(r.probe());
  const MemorySource* b = m.binding(1);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->name, "cgroup v1");
  EXPECT_EQ(b->bytes, 4 * GiB - GiB / 2);
}

TEST(MemoryLimits, AddressSpaceLimitIsPerProcessLessTheCurrentSize) {
  FakeRoot r;
  r.write("proc/meminfo", "MemAvailable:   20971520 kB\n");
  r.write("proc/self/status", "Name: x\nVmSize:  1048576 kB\n");
  const MemoryLimits m = find_memory_limits(r.probe(12 * GiB));
  ASSERT_EQ(m.sources.size(), 2u);
  // One process: MemAvailable (20 GiB) is larger than RLIMIT_AS's room (11 GiB).
  EXPECT_EQ(m.binding(1)->name, "RLIMIT_AS");
  EXPECT_EQ(m.binding(1)->bytes, 11 * GiB);
  // Four ranks share MemAvailable (5 GiB each); the address space is each one's own.
  EXPECT_EQ(m.binding(4)->name, "MemAvailable");
  EXPECT_EQ(m.per_process(*m.binding(4), 4), 5 * GiB);
}

TEST(MemoryLimits, NothingReadableLimitsNothing) {
  FakeRoot r;
  r.write("proc/empty", "");
  const MemoryLimits m = find_memory_limits(r.probe());
  EXPECT_TRUE(m.sources.empty());
  EXPECT_EQ(m.binding(1), nullptr);
}

TEST(MemoryLimits, FreeDiskBytesOfADirectoryNotMadeYet) {
  const std::optional<uint64_t> free = free_disk_bytes((fs::temp_directory_path() / "not/made/yet").string());
  ASSERT_TRUE(free.has_value());
  EXPECT_GT(*free, 0u);
}

}  // namespace
}  // namespace asteria
