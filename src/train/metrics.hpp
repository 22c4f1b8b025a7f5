#pragma once
// Run outputs: metrics.jsonl (one JSON object per step, appended and flushed as it goes) and the
// terminal progress line. On a terminal the progress line redraws itself; otherwise a plain line
// is printed every `log_every` steps so logs are not flooded.
#include <cstdint>
#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

namespace asteria {

class MetricsWriter {
 public:
  MetricsWriter() = default;
  // append: continue the file (a resumed run) instead of starting it.
  explicit MetricsWriter(const std::string& path, bool append = false);
  ~MetricsWriter();
  MetricsWriter(const MetricsWriter&) = delete;
  MetricsWriter& operator=(const MetricsWriter&) = delete;
  void write(const nlohmann::json& record);

 private:
  std::FILE* file_ = nullptr;
  std::string path_;
};

// A resumed run's metrics.jsonl reads as one uninterrupted run: the lines of steps after
// `last_step` (written by the interrupted run after its checkpoint) are dropped, through a
// temporary file and a rename. A missing file is fine (nothing to keep).
void truncate_metrics_after(const std::string& path, int64_t last_step);

class ProgressLine {
 public:
  ProgressLine(int64_t total_steps, int64_t log_every);
  void update(int64_t step, double loss, double tokens_per_s, double elapsed_s,
              double eval_loss = -1);
  void finish();

 private:
  int64_t total_;
  int64_t log_every_;
  bool tty_;
};

}  // namespace asteria
