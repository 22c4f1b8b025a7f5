#pragma once
// SIGTERM, SIGINT and SIGUSR1 ask a training run to stop at the end of its step with a
// checkpoint (Slurm sends SIGTERM before a preemption or time limit, or a chosen signal with
// --signal). While a StopSignals lives, the first such signal is recorded and returned by
// pending(); a second SIGINT ends the process at once with exit code 130 (the usual ^C ^C).
// The previous handlers come back when it is destroyed. The handler runs on the signal thread
// where main routed the signals first (core/signal_thread.hpp: a handler inside oneDNN's GEMM
// kernels corrupts the heap).
#include <csignal>

namespace asteria {

class StopSignals {
 public:
  StopSignals();
  ~StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;
  // The first stop signal received, or 0.
  int pending() const;

 private:
  struct sigaction old_[3];
};

}  // namespace asteria
