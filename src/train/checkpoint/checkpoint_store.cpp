#include "train/checkpoint/checkpoint_store.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>

#include "core/error.hpp"

namespace fs = std::filesystem;

namespace asteria {

namespace {

const std::regex kStepDir(R"(step(\d{8}))");
const std::regex kTempDir(R"(step\d{8}\.tmp-.*)");

}  // namespace

void write_text_durably(const fs::path& path, const std::string& text) {
  fs::path tmp = path;
  tmp += ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << text;
    out.flush();
    if (!out) fail("cannot write '", tmp.string(), "'");
  }
  fsync_path(tmp.string());
  fs::rename(tmp, path);
  fsync_path(path.parent_path().string());
}

void fsync_path(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY);
  if (fd < 0) fail("cannot open '", path, "' to sync it");
  const int rc = fsync(fd);
  close(fd);
  if (rc != 0) fail("cannot sync '", path, "' to disk");
}

std::string checkpoint_dir_name(int64_t step) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "step%08lld", static_cast<long long>(step));
  return buf;
}

std::vector<StoredCheckpoint> list_checkpoints(const std::string& root) {
  std::vector<StoredCheckpoint> out;
  std::error_code ec;
  if (!fs::is_directory(root, ec)) return out;
  for (const fs::directory_entry& e : fs::directory_iterator(root)) {
    std::smatch m;
    const std::string name = e.path().filename().string();
    if (!e.is_directory() || !std::regex_match(name, m, kStepDir)) continue;
    try {
      const Manifest man = read_manifest((e.path() / "manifest.json").string());
      out.push_back({man.step, e.path().string()});
    } catch (const Error&) {
      // no (valid) manifest: not a checkpoint
    }
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.step < b.step; });
  return out;
}

std::optional<StoredCheckpoint> latest_checkpoint(const std::string& root) {
  std::vector<StoredCheckpoint> all = list_checkpoints(root);
  if (all.empty()) return std::nullopt;
  return all.back();
}

std::vector<std::string> remove_stale_checkpoints(const std::string& root) {
  std::vector<std::string> removed;
  std::error_code ec;
  if (!fs::is_directory(root, ec)) return removed;
  for (const fs::directory_entry& e : fs::directory_iterator(root)) {
    const std::string name = e.path().filename().string();
    const bool temp = std::regex_match(name, kTempDir);
    const bool unfinished = e.is_directory() && std::regex_match(name, kStepDir) &&
                            !fs::exists(e.path() / "manifest.json");
    if (temp || unfinished) removed.push_back(e.path().string());
  }
  for (const std::string& p : removed) fs::remove_all(p);
  return removed;
}

std::string rank_file_name(int rank) {
  char name[32];
  std::snprintf(name, sizeof name, "rank%05d.h5", rank);
  return name;
}

std::vector<std::string> checkpoint_rank_files(const std::string& dir, const Manifest& m) {
  std::vector<std::string> files;
  for (int r = 0; r < m.world_size; ++r) {
    const std::string name = rank_file_name(r);
    if (std::none_of(m.files.begin(), m.files.end(), [&](const ManifestFile& f) { return f.name == name; }))
      fail(dir, "/manifest.json: written by ", m.world_size, " ranks, but it lists no file ", name);
    files.push_back((fs::path(dir) / name).string());
  }
  return files;
}

std::string make_checkpoint_tmp(const std::string& root, int64_t step) {
  static std::atomic<int> serial{0};
  fs::create_directories(root);
  const fs::path tmp =
      fs::path(root) / (checkpoint_dir_name(step) + ".tmp-" + std::to_string(getpid()) + "-" + std::to_string(serial++));
  fs::create_directories(tmp);
  return tmp.string();
}

std::string publish_checkpoint(const std::string& root, const std::string& tmp, const Manifest& manifest) {
  const fs::path final_dir = fs::path(root) / checkpoint_dir_name(manifest.step);
  fsync_path(tmp);
  if (fs::exists(final_dir)) fs::remove_all(final_dir);   // the same step written again
  fs::rename(tmp, final_dir);
  fsync_path(root);
  write_text_durably(final_dir / "manifest.json", manifest_json(manifest));
  return final_dir.string();
}

std::string commit_checkpoint(const std::string& root, Manifest manifest,
                              const std::function<std::vector<std::string>(const std::string&)>& write_files) {
  const fs::path tmp = make_checkpoint_tmp(root, manifest.step);
  manifest.files.clear();
  for (const std::string& name : write_files(tmp.string())) {
    const fs::path p = tmp / name;
    fsync_path(p.string());
    manifest.files.push_back({name, static_cast<uint64_t>(fs::file_size(p)), file_xxh3(p.string())});
  }
  return publish_checkpoint(root, tmp.string(), manifest);
}

std::vector<std::string> apply_retention(const std::string& root, int keep, int64_t keep_every) {
  std::vector<StoredCheckpoint> all = list_checkpoints(root);
  std::vector<std::string> removed;
  for (size_t i = 0; i + static_cast<size_t>(std::max(keep, 0)) < all.size(); ++i) {
    if (keep_every > 0 && all[i].step % keep_every == 0) continue;
    // The manifest goes first: from then on the directory is not a checkpoint, whatever happens.
    fs::remove(fs::path(all[i].dir) / "manifest.json");
    fs::remove_all(all[i].dir);
    removed.push_back(all[i].dir);
  }
  return removed;
}

}  // namespace asteria
