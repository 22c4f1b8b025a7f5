#include "train/metrics.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/error.hpp"

namespace asteria {

MetricsWriter::MetricsWriter(const std::string& path, bool append) : path_(path) {
  file_ = std::fopen(path.c_str(), append ? "a" : "w");
  if (!file_) fail("cannot write metrics file '", path, "': ", std::strerror(errno));
}

MetricsWriter::~MetricsWriter() {
  if (file_) std::fclose(file_);
}

void MetricsWriter::write(const nlohmann::json& record) {
  if (!file_) return;
  std::string line = record.dump();
  line += '\n';
  if (std::fwrite(line.data(), 1, line.size(), file_) != line.size() || std::fflush(file_) != 0)
    fail("cannot write metrics file '", path_, "': ", std::strerror(errno));
}

void truncate_metrics_after(const std::string& path, int64_t last_step) {
  std::ifstream in(path);
  if (!in) return;
  std::string kept, line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    int64_t step = -1;
    try {
      step = nlohmann::json::parse(line).at("step").get<int64_t>();
    } catch (const std::exception&) {
      break;   // a line cut by the crash ends the file
    }
    if (step > last_step) break;
    kept += line + "\n";
  }
  in.close();
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << kept;
    if (!out) fail("cannot write '", tmp, "'");
  }
  std::filesystem::rename(tmp, path);
}

// A terminal to redraw the line on: stdout is one, and no MPI launcher stands between it and the
// user (mpirun gives its ranks a pseudo-terminal even when its own output goes to a log file, so
// a rank's isatty says nothing there: under a launcher the line is printed, not redrawn).
static bool redraw_terminal() {
  for (const char* launcher : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK"})
    if (std::getenv(launcher)) return false;
  return isatty(STDOUT_FILENO) != 0;
}

ProgressLine::ProgressLine(int64_t total_steps, int64_t log_every)
    : total_(total_steps), tty_(redraw_terminal()) {
  log_every_ = log_every > 0 ? log_every : std::max<int64_t>(1, total_steps / 20);
}

static std::string format_eta(double s) {
  char buf[32];
  int t = static_cast<int>(s + 0.5);
  std::snprintf(buf, sizeof buf, "%d:%02d:%02d", t / 3600, (t / 60) % 60, t % 60);
  return buf;
}

void ProgressLine::update(int64_t step, double loss, double tokens_per_s, double elapsed_s,
                          double eval_loss) {
  const bool due = step == total_ || step == 1 || step % log_every_ == 0 || eval_loss >= 0;
  if (!tty_ && !due) return;
  double eta = step > 0 ? elapsed_s / step * (total_ - step) : 0;
  char buf[256];
  int n = std::snprintf(buf, sizeof buf, "step %lld/%lld  loss %.4f  %.0f tok/s  elapsed %s  ETA %s",
                        static_cast<long long>(step), static_cast<long long>(total_), loss,
                        tokens_per_s, format_eta(elapsed_s).c_str(), format_eta(eta).c_str());
  if (eval_loss >= 0 && n > 0 && n < static_cast<int>(sizeof buf))
    std::snprintf(buf + n, sizeof buf - n, "  eval %.4f", eval_loss);
  if (tty_) {
    std::printf("\r\033[K%s", buf);
    if (eval_loss >= 0) std::printf("\n");
  } else {
    std::printf("%s\n", buf);
  }
  std::fflush(stdout);
}

void ProgressLine::finish() {
  if (tty_) std::printf("\n");
  std::fflush(stdout);
}

}  // namespace asteria
