#include "train/stop_signals.hpp"

#include <unistd.h>

#include <atomic>

namespace asteria {

namespace {

constexpr int kSignals[3] = {SIGTERM, SIGINT, SIGUSR1};
std::atomic<int> g_pending{0};

void on_stop_signal(int sig) {
  int none = 0;
  if (g_pending.compare_exchange_strong(none, sig)) return;
  if (sig == SIGINT) {
    static const char msg[] = "\nasteria-train: second SIGINT: stopping now, without a checkpoint\n";
    (void)!write(STDERR_FILENO, msg, sizeof msg - 1);
    _exit(130);
  }
}

}  // namespace

StopSignals::StopSignals() {
  g_pending = 0;
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sa.sa_flags = SA_RESTART;   // I/O and waits in flight carry on
  sigemptyset(&sa.sa_mask);
  for (int i = 0; i < 3; ++i) sigaction(kSignals[i], &sa, &old_[i]);
}

StopSignals::~StopSignals() {
  for (int i = 0; i < 3; ++i) sigaction(kSignals[i], &old_[i], nullptr);
}

int StopSignals::pending() const { return g_pending.load(); }

}  // namespace asteria
