// Faults under real mpirun (2 ranks of the tiny model, oversubscribed): never a hang.
//   - A rank killed with kill -9 mid-run (rank 1, and rank 0) ends the whole job within 60 s,
//     non-zero, with a message naming the dead rank (Open MPI's "process rank N ... exited on
//     signal 9").
//   - A collective stalled past distributed.timeout_s (the ASTERIA_FAULT_STALL test hook of
//     comm/mpi_communicator.hpp sleeps one rank before it) ends the job within timeout_s + a
//     margin, non-zero, with the waiting rank's message naming the op and the layer; the other
//     rank, still asleep, is ended by MPI_Abort (the stall is far longer than the test). The
//     checkpoint written before still loads.
//   - An MPI request abandoned unfinished, by a rank that then neither aborts nor exits, ends the
//     job by the communicator's watchdog (tests/mpi's MpiFaults.DISABLED_* test, run here).
// Each job runs in its own process group; a job still alive at its deadline is killed with it and
// the test fails, so a hang fails the test instead of blocking the suite.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include "core/timer.hpp"
#include "test_util.hpp"
#include "train/checkpoint/checkpoint_store.hpp"

using asteria::testing::TempDir;
namespace fs = std::filesystem;

namespace {

const std::string kBin = ASTERIA_BIN_DIR;
const std::string kTrain = kBin + "/asteria-train";
const std::string kConfigs = std::string(ASTERIA_SOURCE_DIR) + "/configs";
// Longer than any healthy wait between two ranks of the tiny model on a loaded 2-core machine,
// short enough for the test.
constexpr double kTimeoutS = 8;

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

size_t metric_lines(const std::string& run_dir) {
  std::ifstream in(run_dir + "/metrics.jsonl");
  size_t n = 0;
  for (std::string line; std::getline(in, line);) n += !line.empty();
  return n;
}

// mpirun -np 2 ... in its own process group, stdout + stderr into `log`, with `env` set
// (NAME=value) and passed to the ranks. `tag` is put in every rank's environment, so that the
// test can find its ranks' pids and no one else's.
struct Job {
  pid_t pid = -1;
  std::string log, tag;
  asteria::Timer clock;

  Job(const std::vector<std::string>& args, const std::string& log_path, std::vector<std::string> env = {})
      : log(log_path) {
    tag = "ASTERIA_FAULTS_TEST_TAG=" + std::to_string(getpid()) + "-" + std::to_string(std::random_device{}());
    env.push_back(tag);
    env.insert(env.end(), {"OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1"});
    std::vector<std::string> argv = {"mpirun", "--oversubscribe", "-np", "2"};
    for (const std::string& e : env) argv.insert(argv.end(), {"-x", e.substr(0, e.find('='))});
    argv.insert(argv.end(), args.begin(), args.end());
    pid = fork();
    if (pid == 0) {
      setpgid(0, 0);
      for (const std::string& e : env) putenv(const_cast<char*>(strdup(e.c_str())));
      std::FILE* f = std::freopen(log.c_str(), "a", stdout);
      if (f) dup2(fileno(stdout), STDERR_FILENO);
      std::vector<char*> a;
      for (const std::string& s : argv) a.push_back(const_cast<char*>(s.c_str()));
      a.push_back(nullptr);
      execvp("mpirun", a.data());
      _exit(127);
    }
    setpgid(pid, pid);   // also from here: no race with the child's own call
    clock.reset();
  }
  ~Job() {
    if (pid > 0) kill_all();
  }

  // The exit status (128 + signal when killed), or -1 if the job was still running `limit_s`
  // after it started (then it is killed, process group and all).
  int wait(double limit_s) {
    for (;;) {
      int status = 0;
      const pid_t r = waitpid(pid, &status, WNOHANG);
      if (r == pid) {
        pid = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      if (clock.seconds() > limit_s) {
        kill_all();
        return -1;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }

  // The pid of rank `rank` of this job (0 until it has started).
  pid_t rank_pid(int rank) const {
    const std::string want_rank = "OMPI_COMM_WORLD_RANK=" + std::to_string(rank);
    for (const auto& p : fs::directory_iterator("/proc")) {
      const std::string name = p.path().filename().string();
      if (name.find_first_not_of("0123456789") != std::string::npos) continue;
      std::ifstream in(p.path() / "environ", std::ios::binary);
      bool mine = false, right_rank = false;
      for (std::string var; std::getline(in, var, '\0');) {
        mine |= var == tag;
        right_rank |= var == want_rank;
      }
      if (mine && right_rank) return static_cast<pid_t>(std::stol(name));
    }
    return 0;
  }

  std::string output() const { return read_file(log); }

 private:
  void kill_all() {
    kill(-pid, SIGKILL);
    int status = 0;
    waitpid(pid, &status, 0);
    pid = -1;
  }
};

class Faults : public ::testing::Test {
 protected:
  void SetUp() override { asteria::testing::write_bigram_tokens(dir_.file("train.bin"), 40000, 512, 3); }

  // asteria-train on the tiny model (AdamW), distributed.fsdp none, micro-batch 4 per rank.
  std::vector<std::string> train_args(const std::string& run, const std::vector<std::string>& sets) const {
    std::vector<std::string> a = {kTrain, "--config", kConfigs + "/tiny-adamw.yaml"};
    for (const std::string& s :
         {"data.train=" + dir_.file("train.bin"), std::string("data.eval="), "run.dir=" + dir_.file(run),
          std::string("distributed.fsdp=none"), std::string("train.micro_batch=4"), std::string("runtime.threads=1"),
          std::string("train.warmup_steps=2"), "distributed.timeout_s=" + std::to_string(kTimeoutS),
          std::string("run.log_every=1000")})
      a.insert(a.end(), {"--set", s});
    for (const std::string& s : sets) a.insert(a.end(), {"--set", s});
    return a;
  }

  void kill_rank_mid_run(int rank) {
    const std::string run = "run" + std::to_string(rank);
    // Far more steps than the test lasts: only the fault ends the job.
    Job job(train_args(run, {"train.steps=1000000", "checkpoint.enabled=false"}), dir_.file(run + ".log"));
    while (metric_lines(dir_.file(run)) < 5) {
      ASSERT_LT(job.clock.seconds(), 60.0) << "the job did not start training: " << job.output();
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    const pid_t victim = job.rank_pid(rank);
    ASSERT_GT(victim, 0) << "rank " << rank << "'s process not found";
    ASSERT_EQ(kill(victim, SIGKILL), 0);
    const double killed_at = job.clock.seconds();
    const int code = job.wait(killed_at + 60);
    const double took = job.clock.seconds() - killed_at;
    const std::string out = job.output();
    ASSERT_NE(code, -1) << "the job still ran 60 s after rank " << rank << " was killed: " << out;
    EXPECT_NE(code, 0) << out;
    EXPECT_LT(took, 60.0);
    // Open MPI 4: "mpirun noticed that process rank 1 with PID 0 on node vm exited on signal 9 (Killed)."
    EXPECT_NE(out.find("process rank " + std::to_string(rank) + " "), std::string::npos) << out;
    EXPECT_NE(out.find("exited on signal 9"), std::string::npos) << out;
    std::printf("rank %d killed at %.1f s of the job; the job ended %.2f s later with %d\n", rank, killed_at, took,
                code);
  }

  // Trains 4 steps at 2 ranks (checkpoints at steps 2 and 4), then resumes with rank `stalled`
  // asleep before the first collective whose label contains `label` (in step 5): rank `waiting`'s
  // wait must time out, name the label, and end the job.
  void stall_rank(int stalled, const std::string& label) {
    const int waiting = 1 - stalled;
    const std::string run = "stall";
    Job first(train_args(run, {"train.steps=1000", "train.stop_after=4", "checkpoint.every=2"}), dir_.file("first.log"));
    ASSERT_EQ(first.wait(120), 0) << first.output();
    ASSERT_EQ(metric_lines(dir_.file(run)), 4u);

    // The sleep outlasts the test: only the waiting rank's MPI_Abort can end the stalled one.
    const std::string stall = "ASTERIA_FAULT_STALL=" + std::to_string(stalled) + ":" + label + ":600";
    Job job(train_args(run, {"train.steps=1000", "checkpoint.every=2", "checkpoint.resume=latest"}),
            dir_.file("stalled.log"), {stall});
    const int code = job.wait(kTimeoutS + 40);
    const double took = job.clock.seconds();
    const std::string out = job.output();
    ASSERT_NE(code, -1) << "the job still ran " << kTimeoutS + 40 << " s after it started: " << out;
    EXPECT_NE(code, 0) << out;
    EXPECT_GE(took, kTimeoutS) << "ended before the timeout could: " << out;
    EXPECT_NE(out.find("rank " + std::to_string(stalled) + " sleeps 600 s before starting '" + label), std::string::npos)
        << "the stall did not happen where asked: " << out;
    std::ostringstream msg;
    msg << "asteria-train: error: rank " << waiting << ": " << label << " did not complete within distributed.timeout_s = "
        << kTimeoutS << " s";
    EXPECT_NE(out.find(msg.str()), std::string::npos) << out;
    // (Open MPI's own "MPI_ABORT was invoked on rank N" is not checked: mpirun sometimes loses it,
    // "ORTE_ERROR_LOG: Data unpack would read past end of buffer ... show_help.c". The job ending
    // long before the 600 s stall is what shows the stalled rank was aborted.)
    std::printf("rank %d stalled in '%s': the job ended after %.2f s (timeout %.0f s) with %d\n", stalled,
                label.c_str(), took, kTimeoutS, code);

    // Nothing in run.dir is damaged: the checkpoint of step 4 is still the latest and resumes (at
    // one rank, the same global batch).
    const auto latest = asteria::latest_checkpoint(dir_.file(run) + "/checkpoints");
    ASSERT_TRUE(latest.has_value());
    EXPECT_EQ(latest->step, 4);
    std::string cmd;
    for (const std::string& a : train_args(run, {"train.steps=1000", "train.stop_after=6", "checkpoint.resume=latest",
                                                 "train.micro_batch=8", "checkpoint.allow_changes=[train.micro_batch]"}))
      cmd += a + " ";
    std::string resumed;
    ASSERT_EQ(asteria::testing::run_command(cmd, &resumed), 0) << resumed;
    EXPECT_EQ(metric_lines(dir_.file(run)), 6u) << resumed;
  }

  TempDir dir_{"faults"};
};

}  // namespace

TEST_F(Faults, AKilledRankEndsTheJobWithinAMinuteNamingTheRank) { kill_rank_mid_run(1); }

TEST_F(Faults, AKilledRankZeroEndsTheJobWithinAMinuteNamingTheRank) { kill_rank_mid_run(0); }

TEST_F(Faults, AStalledGradientAllReduceEndsTheJobNamingOpAndLayer) {
  stall_rank(1, "all_reduce of the gradient of blocks.0");
}

TEST_F(Faults, AStalledRankZeroEndsTheJobFromRankOne) {
  // (Not the head: the tiny model's tied head has no parameters of its own, and a collective of
  // no elements completes on each rank alone.)
  stall_rank(0, "all_reduce of the gradient of blocks.1");
}

TEST_F(Faults, AnAbandonedRequestEndsTheJobByTheWatchdog) {
  // tests/mpi/abandoned_request_test.cpp: rank 0 drops a receive that timed out and then sleeps,
  // neither aborting nor exiting; rank 1 sleeps. The communicator's watchdog ends the job 10 s later.
  Job job({kBin + "/test_mpi", "--gtest_also_run_disabled_tests", "--gtest_filter=MpiFaults.*"}, dir_.file("watchdog.log"));
  const int code = job.wait(60);
  const double took = job.clock.seconds();
  const std::string out = job.output();
  ASSERT_NE(code, -1) << "the job still ran 60 s after it started: " << out;
  EXPECT_NE(code, 0) << out;
  EXPECT_NE(out.find("asteria: rank 0: 'a receive rank 1 never sends' was abandoned unfinished 10 s ago"), std::string::npos)
      << out;
  EXPECT_LT(took, 40.0) << out;
  std::printf("the watchdog ended the job after %.2f s with %d\n", took, code);
}
