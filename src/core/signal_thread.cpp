// The asynchronous signals' own thread (contract: core/signal_thread.hpp).
#include "core/signal_thread.hpp"

#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <mutex>
#include <thread>

namespace asteria {

namespace {

constexpr int kAsyncSignals[] = {SIGHUP,  SIGINT,  SIGQUIT, SIGUSR1,   SIGUSR2, SIGALRM,  SIGTERM, SIGCHLD, SIGTSTP,
                                 SIGTTIN, SIGTTOU, SIGURG,  SIGXCPU,   SIGVTALRM, SIGPROF, SIGWINCH, SIGIO,  SIGPWR};

sigset_t async_set() {
  sigset_t set;
  sigemptyset(&set);
  for (int s : kAsyncSignals) sigaddset(&set, s);
  return set;
}

std::atomic<pid_t> g_signal_thread{0};

void unblock_in_child() {
  const sigset_t set = async_set();
  pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
}

}  // namespace

void route_async_signals_to_signal_thread() {
  static std::once_flag once;
  std::call_once(once, [] {
    const sigset_t set = async_set();
    pthread_sigmask(SIG_BLOCK, &set, nullptr);
    pthread_atfork(nullptr, nullptr, unblock_in_child);
    std::thread([set] {
      pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
      g_signal_thread.store(gettid());
      for (;;) pause();   // handlers run here; pause returns after each
    }).detach();
    while (g_signal_thread.load() == 0) std::this_thread::yield();
  });
}

pid_t signal_thread_id() { return g_signal_thread.load(); }

}  // namespace asteria
