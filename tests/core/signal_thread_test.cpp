// core/signal_thread.hpp: with the routing in place, a storm of signals sent while oneDNN's fp32
// GEMMs run on every thread is handled on the signal thread alone, and the GEMMs' results stay
// the same bits. Without it, such a signal lands on a thread inside oneDNN 2.6's generated
// kernel, which points its stack pointer into the heap: the heap is corrupted and the process
// aborts (oneDNN issue 4845; the stop signal of `scancel --signal=USR1` did this mid-step).
//
// The routing must happen before any thread exists, so the check runs in a fresh process of
// this binary: the disabled test below, which the first test starts.
#include <gtest/gtest.h>

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <omp.h>

#include "core/cpu/gemm.hpp"
#include "core/cpu/gemm_routing.hpp"
#include "core/signal_thread.hpp"
#include "test_util.hpp"

namespace asteria {
namespace {

std::atomic<long> g_handled{0}, g_handled_elsewhere{0};
std::atomic<pid_t> g_expected_thread{0};

void count_signal(int) {
  g_handled.fetch_add(1);
  if (gettid() != g_expected_thread.load()) g_handled_elsewhere.fetch_add(1);
}

int threads_of_this_process() {
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/task")) n += e.is_directory() ? 1 : 0;
  return n;
}

TEST(SignalThread, SignalsDuringOneDnnGemmsRunOnTheSignalThreadAndChangeNothing) {
  // A corrupted heap can also deadlock the OpenMP team instead of aborting: bounded.
  std::string out;
  const int rc = testing::run_command("timeout 120 " + std::string(ASTERIA_BIN_DIR) +
                                 "/test_core --gtest_also_run_disabled_tests "
                                 "--gtest_filter=SignalThread.DISABLED_SignalStormDuringOneDnnGemms",
                             &out);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("[  PASSED  ] 1 test"), std::string::npos) << out;
}

// Run by the test above in a process of its own.
TEST(SignalThread, DISABLED_SignalStormDuringOneDnnGemms) {
  // No thread may exist before the routing: every later one inherits the blocked signals.
  ASSERT_EQ(threads_of_this_process(), 1) << "threads started before the routing";
  route_async_signals_to_signal_thread();
  g_expected_thread = signal_thread_id();
  ASSERT_NE(g_expected_thread.load(), 0);
  struct sigaction sa {};
  sa.sa_handler = count_signal;
  sa.sa_flags = SA_RESTART;
  sigemptyset(&sa.sa_mask);
  ASSERT_EQ(sigaction(SIGUSR2, &sa, nullptr), 0);

  // A weight-gradient-like product, long enough that most signals arrive inside the kernels.
  set_gemm_choice(GemmChoice::OneDnn);
  const int M = 256, N = 512, K = 1024;
  std::vector<float> a(size_t(M) * K), b(size_t(K) * N), c(size_t(M) * N), first;
  for (size_t i = 0; i < a.size(); i++) a[i] = float(int(i % 13) - 6) / 8.f;
  for (size_t i = 0; i < b.size(); i++) b[i] = float(int(i % 11) - 5) / 4.f;
  cpu::gemm(true, false, M, N, K, 1.f, a.data(), M, b.data(), N, 0.f, c.data(), N);
  first = c;

  std::atomic<bool> stop{false};
  std::thread sender([&] {
    while (!stop.load()) {
      kill(getpid(), SIGUSR2);
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  });
  long calls = 0, changed = 0;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (std::chrono::steady_clock::now() < until) {
    cpu::gemm(true, false, M, N, K, 1.f, a.data(), M, b.data(), N, 0.f, c.data(), N);
    changed += std::memcmp(c.data(), first.data(), c.size() * sizeof(float)) != 0;
    calls++;
  }
  stop = true;
  sender.join();
  set_gemm_choice(GemmChoice::Auto);
  std::printf("%ld GEMMs on %d threads, %ld signals handled, %ld of them off the signal thread\n", calls,
              omp_get_max_threads(), g_handled.load(), g_handled_elsewhere.load());
  EXPECT_GT(g_handled.load(), 1000);
  EXPECT_EQ(g_handled_elsewhere.load(), 0);
  EXPECT_EQ(changed, 0);
}

}  // namespace
}  // namespace asteria
