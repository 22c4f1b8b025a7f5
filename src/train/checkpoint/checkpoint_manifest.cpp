#include "train/checkpoint/checkpoint_manifest.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.hpp"

namespace fs = std::filesystem;

namespace asteria {

namespace {

std::string hex(uint64_t h) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

// Reads [offset, offset + size) of an open file through `buf`, feeding the hash.
void hash_range(int fd, uint64_t offset, uint64_t size, std::vector<char>& buf, XXH3_state_t* st,
                const std::string& path) {
  while (size > 0) {
    const size_t want = static_cast<size_t>(std::min<uint64_t>(size, buf.size()));
    const ssize_t got = pread(fd, buf.data(), want, static_cast<off_t>(offset));
    if (got <= 0) fail("cannot read '", path, "'");
    XXH3_64bits_update(st, buf.data(), static_cast<size_t>(got));
    offset += static_cast<uint64_t>(got);
    size -= static_cast<uint64_t>(got);
  }
}

// `before(fd)` runs on the open file before it is read.
template <class F, class B>
std::string hash_file(const std::string& path, F&& ranges, B&& before) {
  const int fd = open(path.c_str(), O_RDONLY);
  if (fd < 0) fail("cannot open '", path, "'");
  before(fd);
  XXH3_state_t* st = XXH3_createState();
  XXH3_64bits_reset(st);
  std::vector<char> buf(size_t{8} << 20);
  try {
    ranges([&](uint64_t offset, uint64_t size) { hash_range(fd, offset, size, buf, st, path); });
  } catch (...) {
    XXH3_freeState(st);
    close(fd);
    throw;
  }
  const uint64_t h = XXH3_64bits_digest(st);
  XXH3_freeState(st);
  close(fd);
  return hex(h);
}

template <class F>
std::string hash_file(const std::string& path, F&& ranges) {
  return hash_file(path, std::forward<F>(ranges), [](int) {});
}

// The whole file, read sequentially.
std::string hash_whole_file(const std::string& path, bool start_writeback) {
  std::error_code ec;
  const uint64_t size = fs::file_size(path, ec);
  if (ec) fail("cannot read '", path, "'");
  return hash_file(
      path, [&](auto&& range) { range(0, size); },
      [&](int fd) {
        if (start_writeback) sync_file_range(fd, 0, 0, SYNC_FILE_RANGE_WRITE);   // advisory: errors show at fsync
      });
}

// Checksums remembered by remember_file_xxh3, with the identity of the file they were taken of.
struct FileIdentity {
  dev_t dev = 0;
  ino_t ino = 0;
  off_t size = 0;
  timespec mtime{}, ctime{};
  bool operator==(const FileIdentity& o) const {
    return dev == o.dev && ino == o.ino && size == o.size && mtime.tv_sec == o.mtime.tv_sec &&
           mtime.tv_nsec == o.mtime.tv_nsec && ctime.tv_sec == o.ctime.tv_sec && ctime.tv_nsec == o.ctime.tv_nsec;
  }
};

bool identity_of(const std::string& path, FileIdentity& id) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) return false;
  id = {st.st_dev, st.st_ino, st.st_size, st.st_mtim, st.st_ctim};
  return true;
}

struct Remembered {
  FileIdentity id;
  std::string xxh3;
};
std::mutex remembered_mutex;
std::map<std::string, Remembered> remembered;   // by path; a few entries (files being committed)
constexpr size_t kMaxRemembered = 256;

std::string remembered_key(const std::string& path) {
  std::error_code ec;
  const fs::path abs = fs::absolute(path, ec);
  return ec ? path : abs.lexically_normal().string();
}

template <class T>
T field(const nlohmann::json& j, const char* key, const std::string& path) {
  if (!j.contains(key)) fail(path, ": field '", key, "' is missing");
  try {
    return j.at(key).get<T>();
  } catch (const nlohmann::json::exception&) {
    fail(path, ": field '", key, "' has the wrong type");
  }
}

}  // namespace

std::string manifest_json(const Manifest& m) {
  nlohmann::json data = nlohmann::json::array(), files = nlohmann::json::array();
  for (const DataFingerprint& d : m.data)
    data.push_back({{"role", d.role}, {"path", d.path}, {"bytes", d.bytes}, {"fingerprint", d.fingerprint}});
  for (const ManifestFile& f : m.files) files.push_back({{"name", f.name}, {"bytes", f.bytes}, {"xxh3", f.xxh3}});
  nlohmann::json j = {{"format_version", m.format_version}, {"step", m.step},     {"tokens", m.tokens},
                      {"world_size", m.world_size},         {"elapsed_s", m.elapsed_s}, {"config", m.config},
                      {"config_hash", m.config_hash},       {"data", data},       {"files", files}};
  return j.dump(2) + "\n";
}

Manifest parse_manifest(const std::string& text, const std::string& path) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    fail(path, ": not valid JSON (", e.what(), ")");
  }
  if (!j.is_object()) fail(path, ": not a JSON object");
  Manifest m;
  m.format_version = field<int>(j, "format_version", path);
  if (m.format_version != kCheckpointFormatVersion)
    fail(path, ": checkpoint format version ", m.format_version, " is not known to this asteria (it reads version ",
         kCheckpointFormatVersion, ")");
  m.step = field<int64_t>(j, "step", path);
  m.tokens = field<int64_t>(j, "tokens", path);
  m.world_size = field<int>(j, "world_size", path);
  m.elapsed_s = field<double>(j, "elapsed_s", path);
  m.config = field<std::string>(j, "config", path);
  m.config_hash = field<std::string>(j, "config_hash", path);
  if (m.step < 1 || m.world_size < 1) fail(path, ": step and world_size must be positive");
  for (const auto& d : field<nlohmann::json>(j, "data", path))
    m.data.push_back({field<std::string>(d, "role", path), field<std::string>(d, "path", path),
                      field<uint64_t>(d, "bytes", path), field<std::string>(d, "fingerprint", path)});
  for (const auto& f : field<nlohmann::json>(j, "files", path))
    m.files.push_back({field<std::string>(f, "name", path), field<uint64_t>(f, "bytes", path),
                       field<std::string>(f, "xxh3", path)});
  if (m.files.empty()) fail(path, ": lists no files");
  if (text_xxh3(m.config) != m.config_hash) fail(path, ": the config does not match its hash");
  return m;
}

Manifest read_manifest(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, ": missing or unreadable (a directory without a manifest is not a checkpoint)");
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_manifest(ss.str(), path);
}

std::string file_xxh3(const std::string& path) {
  FileIdentity id;
  if (identity_of(path, id)) {
    std::lock_guard<std::mutex> lock(remembered_mutex);
    auto it = remembered.find(remembered_key(path));
    if (it != remembered.end()) {
      const bool same = it->second.id == id;
      std::string h = std::move(it->second.xxh3);
      remembered.erase(it);
      if (same) return h;
    }
  }
  return hash_whole_file(path, false);
}

std::string remember_file_xxh3(const std::string& path) {
  FileIdentity before, after;
  const bool known = identity_of(path, before);
  const std::string h = hash_whole_file(path, true);
  if (known && identity_of(path, after) && after == before) {   // not changed while it was read
    std::lock_guard<std::mutex> lock(remembered_mutex);
    if (remembered.size() >= kMaxRemembered) remembered.clear();
    remembered[remembered_key(path)] = {after, h};
  }
  return h;
}

std::string text_xxh3(const std::string& text) { return hex(XXH3_64bits(text.data(), text.size())); }

void verify_files(const std::string& dir, const Manifest& m) {
  for (const ManifestFile& f : m.files) {
    const std::string path = (fs::path(dir) / f.name).string();
    std::error_code ec;
    const uint64_t size = fs::file_size(path, ec);
    if (ec) fail(path, ": missing (listed in ", dir, "/manifest.json)");
    if (size != f.bytes)
      fail(path, ": ", size, " bytes, the manifest says ", f.bytes, size < f.bytes ? " (truncated)" : "");
    const std::string h = hash_whole_file(path, false);   // from the file, never a remembered checksum
    if (h != f.xxh3) fail(path, ": checksum ", h, " does not match the manifest's ", f.xxh3, " (corrupt)");
  }
}

DataFingerprint token_file_fingerprint(const std::string& role, const std::string& path) {
  std::error_code ec;
  const uint64_t size = fs::file_size(path, ec);
  if (ec) fail("cannot read token file '", path, "'");
  constexpr uint64_t kWindow = 64 << 10, kWindows = 64;
  const std::string h = hash_file(path, [&](auto&& range) {
    if (size <= kWindow * kWindows) return range(0, size);
    for (uint64_t w = 0; w < kWindows; ++w) range((size - kWindow) / (kWindows - 1) * w, kWindow);
  });
  return {role, path, size, h};
}

}  // namespace asteria
