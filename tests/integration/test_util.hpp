#pragma once
// Helpers for integration tests: temporary directories and small token files.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

namespace asteria::testing {

#if defined(ASTERIA_BIN_DIR) && defined(ASTERIA_SOURCE_DIR)
inline const std::string kTrain = std::string(ASTERIA_BIN_DIR) + "/asteria-train";
inline const std::string kConfigs = std::string(ASTERIA_SOURCE_DIR) + "/configs";
// mpirun as root (CI, developers here) needs both variables; 2 cores take 4 ranks oversubscribed.
inline const std::string kMpirun = "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun --oversubscribe ";
#endif

// A fresh directory under the system temp dir, removed when the object dies.
class TempDir {
 public:
  explicit TempDir(const std::string& tag) {
    path_ = std::filesystem::temp_directory_path() /
            ("asteria-" + tag + "-" + std::to_string(std::random_device{}()));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// A learnable synthetic language over `vocab` ids: each token is usually a fixed function of the
// previous one (a bigram a model can learn), sometimes random. Written as uint16.
inline void write_bigram_tokens(const std::string& path, size_t count, int vocab, uint32_t seed,
                                double noise = 0.1) {
  std::mt19937 rng(seed);
  std::vector<uint16_t> toks(count);
  uint32_t t = 1;
  for (size_t i = 0; i < count; ++i) {
    if (std::uniform_real_distribution<double>(0, 1)(rng) < noise) t = rng() % vocab;
    else t = (t * 7 + 3) % vocab;
    toks[i] = static_cast<uint16_t>(t);
  }
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(toks.data()), static_cast<std::streamsize>(toks.size() * 2));
}

// Runs a shell command, returns its exit status and captures stdout+stderr.
inline int run_command(const std::string& cmd, std::string* output) {
  std::string full = cmd + " 2>&1";
  FILE* p = popen(full.c_str(), "r");
  if (!p) return -1;
  char buf[4096];
  size_t n;
  output->clear();
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) output->append(buf, n);
  int status = pclose(p);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// A run's metrics.jsonl, one record per line; its losses.
inline std::vector<nlohmann::json> metrics_lines(const std::string& run_dir) {
  std::vector<nlohmann::json> out;
  std::ifstream in(run_dir + "/metrics.jsonl");
  for (std::string line; std::getline(in, line);) out.push_back(nlohmann::json::parse(line));
  return out;
}
inline std::vector<double> losses(const std::string& run_dir) {
  std::vector<double> out;
  for (const nlohmann::json& r : metrics_lines(run_dir)) out.push_back(r.at("loss").get<double>());
  return out;
}
// The largest |a - b| / |a| over the steps both have.
inline double worst_relative(const std::vector<double>& a, const std::vector<double>& b) {
  double worst = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) worst = std::max(worst, std::abs(a[i] - b[i]) / std::abs(a[i]));
  return worst;
}

}  // namespace asteria::testing
