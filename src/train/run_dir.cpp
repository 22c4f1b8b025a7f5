#include "train/run_dir.hpp"

#include <cstdio>

#include "core/error.hpp"
#include "train/checkpoint/checkpoint_store.hpp"
#include "train/checkpoint/checkpointer.hpp"
#include "train/checkpoint/resume_check.hpp"
#include "train/metrics.hpp"

namespace fs = std::filesystem;

namespace asteria {

void adopt_resumed_config(Config& cfg, bool writer) {
  const std::string dir = resolve_resume(cfg);
  if (dir.empty()) return;
  const Manifest m = read_manifest((fs::path(dir) / "manifest.json").string());
  const std::vector<std::string> kept = adopt_checkpoint_config(cfg, load_saved_config(m.config, dir + "/manifest.json"));
  if (!writer || kept.empty()) return;
  std::string list;
  for (const std::string& k : kept) list += "\n  " + k;
  std::fprintf(stderr, "asteria-train: resuming keeps the checkpoint's value of these keys the config does not give:%s\n",
               list.c_str());
}

std::string check_run_dir(const Config& cfg, bool writer, int ranks) {
  ASTERIA_CHECK(!cfg.data.train.empty(), cfg.source, ": data.train is required to train (a token file "
                "made by `asteria-data encode`)");
  const std::string resume_dir = resolve_resume(cfg);
  // --resume latest with no checkpoint yet (a job stopped before its first one, requeued with
  // the same command) starts the run again from scratch.
  const bool restart = cfg.checkpoint.resume_latest() && resume_dir.empty();
  if (restart && writer)
    std::fprintf(stderr, "asteria-train: note: no checkpoint under %s/checkpoints; starting fresh\n", cfg.run.dir.c_str());
  if (!resume_dir.empty()) {
    const Manifest m = read_manifest((fs::path(resume_dir) / "manifest.json").string());
    const Config saved = load_saved_config(m.config, resume_dir + "/manifest.json");
    const std::vector<std::string> changed = check_resume_compatible(saved, cfg, m, resume_dir, ranks);
    if (writer && !changed.empty()) {
      std::string list;
      for (const std::string& c : changed) list += "\n  " + c;
      std::fprintf(stderr, "asteria-train: resuming with this machine's placement, which changes the arithmetic, not the "
                   "run:%s\n", list.c_str());
    }
  } else if (!cfg.run.overwrite && !restart && fs::exists(fs::path(cfg.run.dir) / "metrics.jsonl")) {
    fail("run.dir '", cfg.run.dir, "' already holds a run (metrics.jsonl); choose another run.dir, "
         "set run.overwrite=true, or resume it (--resume latest)");
  }
  return resume_dir;
}

void prepare_run_dir(const fs::path& dir, const Config& cfg, const std::string& resume_dir, int64_t resumed_step) {
  const std::string root = (dir / "checkpoints").string();
  if (resume_dir.empty() && cfg.run.overwrite && fs::exists(root)) {
    std::fprintf(stderr, "asteria-train: note: run.overwrite: removing the checkpoints of the earlier run in %s\n",
                 root.c_str());
    fs::remove_all(root);
  }
  for (const std::string& p : remove_stale_checkpoints(root))
    std::fprintf(stderr, "asteria-train: note: removed %s, an incomplete checkpoint\n", p.c_str());
  if (!resume_dir.empty()) {
    truncate_metrics_after((dir / "metrics.jsonl").string(), resumed_step);
    std::fprintf(stderr, "asteria-train: resuming from %s (step %lld)\n", resume_dir.c_str(),
                 static_cast<long long>(resumed_step));
  }
}

}  // namespace asteria
