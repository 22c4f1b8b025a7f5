#pragma once
// The memory a process may use, from every source that can limit it, and which one binds:
//   MemAvailable   /proc/meminfo: what the machine can give without swapping (shared by the
//                  processes on it)
//   cgroup v2      memory.max minus memory.current of the process's cgroup and of each parent
//                  (the tightest counts): a Slurm job's --mem, a container's limit
//   cgroup v1      memory.limit_in_bytes minus memory.usage_in_bytes of the memory controller's
//                  cgroup (older systems)
//   RLIMIT_AS      the address-space limit (ulimit -v) minus the process's current VmSize: per
//                  process, not shared
// Each source also says how much of what it counts the process holds itself (/proc/self/status).
// A source that is absent or says "no limit" is left out. The files are read under `root`
// ("" = the real /proc and /sys; tests give a directory laid out like them).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace asteria {

struct MemorySource {
  std::string name;     // "MemAvailable", "cgroup v2", "cgroup v1", "RLIMIT_AS"
  uint64_t bytes = 0;   // what this source leaves the process (or the processes sharing it)
  std::string where;    // the file or call it came from, for messages
  bool shared = true;   // shared by the processes of the machine (or of the cgroup); false: per process
  uint64_t own = 0;     // what this process holds of what the source counts (VmRSS; VmSize for
                        // RLIMIT_AS): with `bytes`, the limit of a process that is already running
};

struct MemoryProbe {
  std::string root;                           // "" = the real /proc and /sys
  std::optional<uint64_t> address_space;      // RLIMIT_AS's soft limit; unset = getrlimit
};

struct MemoryLimits {
  std::vector<MemorySource> sources;
  uint64_t resident = 0;   // this process's VmRSS now (0: unknown)
  // The smallest share of one process of `processes` sharing the machine (shared sources
  // divided among them), or null when no source limits anything.
  const MemorySource* binding(int processes) const;
  uint64_t per_process(const MemorySource& s, int processes) const {
    return s.shared && processes > 1 ? s.bytes / static_cast<uint64_t>(processes) : s.bytes;
  }
};

MemoryLimits find_memory_limits(const MemoryProbe& probe = {});

// The free bytes of the file system holding `dir` (or its nearest existing parent; statvfs),
// nullopt when it cannot be read.
std::optional<uint64_t> free_disk_bytes(const std::string& dir);

}  // namespace asteria
