#include "core/memory_limits.hpp"

#include <sys/resource.h>
#include <sys/statvfs.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace fs = std::filesystem;

namespace asteria {

namespace {

// The first word of a file as a byte count; nullopt when missing, unreadable or "max".
std::optional<uint64_t> read_bytes(const fs::path& path) {
  std::ifstream in(path);
  std::string word;
  if (!(in >> word) || word == "max") return std::nullopt;
  try {
    size_t used = 0;
    const unsigned long long v = std::stoull(word, &used);
    if (used != word.size()) return std::nullopt;
    return static_cast<uint64_t>(v);
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

// A "Key:   N kB" line of a /proc file, in bytes.
std::optional<uint64_t> read_kib_field(const fs::path& path, const std::string& key) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key + ":", 0) != 0) continue;
    std::istringstream fields(line.substr(key.size() + 1));
    unsigned long long kib = 0;
    if (fields >> kib) return static_cast<uint64_t>(kib) * 1024;
  }
  return std::nullopt;
}

// This process's cgroup path for a controller line of /proc/self/cgroup: "0::" (v2) or one
// naming `controller` (v1).
std::optional<std::string> cgroup_path(const fs::path& proc_cgroup, bool v2) {
  std::ifstream in(proc_cgroup);
  std::string line;
  while (std::getline(in, line)) {
    const size_t a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
    if (v2 && line.compare(0, a, "0") == 0 && controllers.empty()) return path;
    if (!v2) {
      std::istringstream names(controllers);
      for (std::string n; std::getline(names, n, ',');)
        if (n == "memory") return path;
    }
  }
  return std::nullopt;
}

// limit - usage of the cgroup at `dir` and of each parent up to `top`, the tightest.
std::optional<MemorySource> cgroup_room(const fs::path& top, const std::string& path, const char* limit_file,
                                        const char* usage_file, const char* name) {
  std::optional<MemorySource> best;
  const fs::path rel = fs::path(path).relative_path();
  fs::path dir = rel.empty() ? top : top / rel;
  for (;;) {
    if (const std::optional<uint64_t> limit = read_bytes(dir / limit_file);
        limit && *limit < (uint64_t{1} << 60)) {   // cgroup v1 writes "no limit" as a huge number
      const uint64_t used = read_bytes(dir / usage_file).value_or(0);
      const uint64_t room = *limit > used ? *limit - used : 0;
      if (!best || room < best->bytes) best = MemorySource{name, room, (dir / limit_file).string(), true};
    }
    if (dir == top || !dir.has_parent_path() || dir.parent_path() == dir) break;
    dir = dir.parent_path();
  }
  return best;
}

}  // namespace

const MemorySource* MemoryLimits::binding(int processes) const {
  const MemorySource* best = nullptr;
  for (const MemorySource& s : sources)
    if (!best || per_process(s, processes) < per_process(*best, processes)) best = &s;
  return best;
}

MemoryLimits find_memory_limits(const MemoryProbe& probe) {
  const fs::path root = probe.root.empty() ? fs::path("/") : fs::path(probe.root);
  MemoryLimits m;
  if (const auto avail = read_kib_field(root / "proc/meminfo", "MemAvailable"))
    m.sources.push_back({"MemAvailable", *avail, (root / "proc/meminfo").string(), true});
  const fs::path self_cgroup = root / "proc/self/cgroup";
  // cgroup v2 is mounted at /sys/fs/cgroup, or at /sys/fs/cgroup/unified beside v1 (hybrid).
  const fs::path v2_top = fs::exists(root / "sys/fs/cgroup/unified") ? root / "sys/fs/cgroup/unified" : root / "sys/fs/cgroup";
  if (const auto path = cgroup_path(self_cgroup, /*v2=*/true))
    if (auto s = cgroup_room(v2_top, *path, "memory.max", "memory.current", "cgroup v2"))
      m.sources.push_back(*s);
  if (const auto path = cgroup_path(self_cgroup, /*v2=*/false))
    if (auto s = cgroup_room(root / "sys/fs/cgroup/memory", *path, "memory.limit_in_bytes", "memory.usage_in_bytes",
                             "cgroup v1"))
      m.sources.push_back(*s);
  m.resident = read_kib_field(root / "proc/self/status", "VmRSS").value_or(0);
  for (MemorySource& s : m.sources) s.own = m.resident;
  uint64_t as_limit = RLIM_INFINITY;
  if (probe.address_space) {
    as_limit = *probe.address_space;
  } else if (rlimit r{}; getrlimit(RLIMIT_AS, &r) == 0) {
    as_limit = r.rlim_cur;
  }
  if (as_limit != RLIM_INFINITY) {
    const uint64_t size = read_kib_field(root / "proc/self/status", "VmSize").value_or(0);
    m.sources.push_back({"RLIMIT_AS", as_limit > size ? as_limit - size : 0, "getrlimit(RLIMIT_AS) - VmSize", false, size});
  }
  return m;
}

std::optional<uint64_t> free_disk_bytes(const std::string& dir) {
  fs::path p = fs::absolute(dir);
  std::error_code ec;
  while (!fs::exists(p, ec) && p.has_parent_path() && p.parent_path() != p) p = p.parent_path();
  struct statvfs st{};
  if (statvfs(p.c_str(), &st) != 0) return std::nullopt;
  return static_cast<uint64_t>(st.f_bavail) * st.f_frsize;
}

}  // namespace asteria
