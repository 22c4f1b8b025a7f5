// asteria-train as a process: SIGTERM mid-run ends the step, writes a checkpoint and exits with
// kExitCheckpointedOnSignal, and the resumed run equals an uninterrupted one; a second SIGINT
// ends it at once (130); kill -9 at random moments, most of them inside checkpoint writes,
// never leaves `latest` pointing at anything but a complete checkpoint, and the run resumed
// through all the kills equals an uninterrupted one bit for bit.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include "core/hdf5_file.hpp"
#include "model/model.hpp"
#include "train/checkpoint/checkpoint_manifest.hpp"
#include "train/checkpoint/checkpoint_store.hpp"
#include "trainer_runs.hpp"

using namespace asteria;
using asteria::testing::TempDir;
namespace fs = std::filesystem;

namespace {

const std::string kTrain = std::string(ASTERIA_BIN_DIR) + "/asteria-train";

// Starts asteria-train with `args`, its output into `log`.
pid_t spawn(const std::vector<std::string>& args, const std::string& log) {
  const pid_t pid = fork();
  if (pid == 0) {
    std::FILE* f = std::freopen(log.c_str(), "a", stdout);
    if (f) dup2(fileno(stdout), STDERR_FILENO);
    std::vector<char*> argv = {const_cast<char*>(kTrain.c_str())};
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(kTrain.c_str(), argv.data());
    _exit(127);
  }
  return pid;
}

int wait_exit(pid_t pid) {
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

size_t metric_lines(const std::string& run_dir) {
  std::ifstream in(run_dir + "/metrics.jsonl");
  size_t n = 0;
  for (std::string line; std::getline(in, line);) n += !line.empty();
  return n;
}

std::vector<std::string> losses(const std::string& run_dir) {
  std::vector<std::string> out;
  std::ifstream in(run_dir + "/metrics.jsonl");
  for (std::string line; std::getline(in, line);) {
    const size_t a = line.find("\"loss\":"), b = line.find(',', a);
    out.push_back(line.substr(a, b - a));
  }
  return out;
}

// The parameters in the newest checkpoint of a run.
std::vector<double> checkpoint_params(const std::string& run_dir, const Config& cfg) {
  const auto latest = latest_checkpoint(run_dir + "/checkpoints");
  EXPECT_TRUE(latest.has_value());
  if (!latest) return {};
  Hdf5File f(latest->dir + "/rank00000.h5", Hdf5File::Mode::Read);
  std::vector<double> all;
  for (const ParamTable& t : model_param_tables(cfg.model))
    for (const ParamEntry& e : t.entries) {
      const Hdf5Array a = f.read("/params/" + e.name);
      all.insert(all.end(), a.data.begin(), a.data.end());
    }
  return all;
}

class SignalRun : public ::testing::Test {
 protected:
  void SetUp() override {
    asteria::testing::write_bigram_tokens(dir_.file("train.bin"), 20000, 512, 3);
    cfg_file_ = dir_.file("run.yaml");
    std::ofstream(cfg_file_) << "seed: 9\nmodel:\n  preset: tiny\n  n_layers: 2\n";
  }
  std::vector<std::string> sets(const std::string& run, int steps, std::vector<std::string> extra = {}) const {
    std::vector<std::string> s = asteria::testing::short_second_order_sets(dir_, "soap", steps);
    s.erase(std::remove(s.begin(), s.end(), "run.overwrite=true"), s.end());
    s.push_back("run.dir=" + dir_.file(run));
    s.insert(s.end(), extra.begin(), extra.end());
    return s;
  }
  std::vector<std::string> args(const std::vector<std::string>& s, const std::vector<std::string>& more = {}) const {
    std::vector<std::string> a = {"--config", cfg_file_};
    for (const std::string& x : s) a.insert(a.end(), {"--set", x});
    a.insert(a.end(), more.begin(), more.end());
    return a;
  }
  // An uninterrupted run in-process, for reference.
  Config straight(int steps, std::vector<std::string> extra = {}) const {
    Config cfg = load_config(cfg_file_, sets("straight", steps, extra));
    Trainer(cfg).run();
    return cfg;
  }
  TempDir dir_{"signals"};
  std::string cfg_file_;
};

}  // namespace

TEST_F(SignalRun, SigtermCheckpointsAndExitsSoThatResumeEqualsAStraightRun) {
  const int steps = 60;
  const std::string log = dir_.file("sigterm.log");
  const pid_t pid = spawn(args(sets("run", steps)), log);
  while (metric_lines(dir_.file("run")) < 10) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  kill(pid, SIGTERM);
  ASSERT_EQ(wait_exit(pid), kExitCheckpointedOnSignal) << log;
  const auto stopped = latest_checkpoint(dir_.file("run") + "/checkpoints");
  ASSERT_TRUE(stopped.has_value());
  EXPECT_GE(stopped->step, 10);
  EXPECT_LT(stopped->step, steps) << "the signal came too late to test anything";
  EXPECT_EQ(metric_lines(dir_.file("run")), static_cast<size_t>(stopped->step));
  ASSERT_EQ(wait_exit(spawn(args(sets("run", steps), {"--resume", "latest"}), log)), 0) << log;
  const Config cfg = straight(steps);
  EXPECT_EQ(losses(dir_.file("run")), losses(dir_.file("straight")));
  EXPECT_EQ(checkpoint_params(dir_.file("run"), cfg), checkpoint_params(dir_.file("straight"), cfg));
}

TEST_F(SignalRun, SecondSigintStopsAtOnce) {
  // Steps of at least 300 ms (a root job that sleeps, published at once): both signals land
  // inside one step.
  const std::string log = dir_.file("sigint.log");
  const pid_t pid = spawn(args(sets("run", 50, {"runtime.mode=asteria", "runtime.shadow.lane=workers",
                                                "runtime.shadow.delay=0", "optim.precondition_frequency=1",
                                                "runtime.shadow.worker_delay_ms=300"})),
                          log);
  while (metric_lines(dir_.file("run")) < 3) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  kill(pid, SIGINT);
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  kill(pid, SIGINT);
  EXPECT_EQ(wait_exit(pid), 130);
  EXPECT_FALSE(latest_checkpoint(dir_.file("run") + "/checkpoints").has_value());
}

TEST_F(SignalRun, KillDashNineNeverLeavesAnIncompleteLatestCheckpoint) {
  // A checkpoint every step (mostly time in checkpoint writes), killed 20 times at random. Long
  // enough that no run of 20 relaunches finishes it first (60 steps did, on a fast machine).
  const int steps = 150;
  const std::vector<std::string> extra = {"checkpoint.every=1", "checkpoint.keep=2"};
  std::mt19937 rng(std::random_device{}());
  const std::string log = dir_.file("kill.log");
  int kills = 0;
  for (int round = 0; round < 40 && kills < 20; ++round) {
    // The same command every time, as a requeued job runs it (fresh while there is no checkpoint).
    const pid_t pid = spawn(args(sets("run", steps, extra), {"--resume", "latest"}), log);
    const int ms = std::uniform_int_distribution<int>(150, 700)(rng);
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    kill(pid, SIGKILL);
    const int code = wait_exit(pid);
    if (code == 0) break;   // it finished first
    ASSERT_EQ(code, 128 + SIGKILL) << "round " << round << ", " << log;
    ++kills;
    const auto latest = latest_checkpoint(dir_.file("run") + "/checkpoints");
    if (!latest) continue;   // killed before its first checkpoint
    EXPECT_NO_THROW(verify_files(latest->dir, read_manifest(latest->dir + "/manifest.json")))
        << "kill " << kills << " after " << ms << " ms left " << latest->dir << " incomplete";
  }
  EXPECT_GE(kills, 20);
  ASSERT_EQ(wait_exit(spawn(args(sets("run", steps, extra), {"--resume", "latest"}), log)), 0) << log;
  const Config cfg = straight(steps, extra);
  EXPECT_EQ(losses(dir_.file("run")), losses(dir_.file("straight")));
  EXPECT_EQ(checkpoint_params(dir_.file("run"), cfg), checkpoint_params(dir_.file("straight"), cfg));
}
