#pragma once
// The process's asynchronous signals (SIGTERM, SIGINT, SIGUSR1, ...) handled on one thread of
// their own, never on a thread that computes.
//
// Why: oneDNN's generated fp32 GEMM kernels (2.6, Debian's; fixed upstream in 3.11, oneDNN issue
// 4845) point the stack pointer into a heap buffer while they run. A signal whose handler runs
// on such a thread has its frame written there by the kernel: the heap is corrupted and the
// process aborts later in free() ("corrupted size vs. prev_size"). asteria-train catches
// SIGTERM, SIGINT and SIGUSR1 (train/stop_signals.hpp), which Slurm and users send mid-step.
//
//   route_async_signals_to_signal_thread()   first thing in main, before any thread exists:
//     blocks the asynchronous signals in the calling thread, so that every thread created
//     afterwards (OpenMP's, oneDNN's, MPI's, the executor's lanes) starts with them blocked,
//     and starts one thread that unblocks them and waits. The kernel delivers a process-directed
//     signal to a thread that does not block it: that thread. Handlers and default actions
//     (terminate, stop) behave as before; only the thread they run on changes. Idempotent.
//     Children made with fork() (Open MPI's singleton daemon) get the signals unblocked again.
// The set: SIGHUP, SIGINT, SIGQUIT, SIGUSR1, SIGUSR2, SIGALRM, SIGTERM, SIGCHLD, SIGTSTP, SIGTTIN,
// SIGTTOU, SIGURG, SIGXCPU, SIGVTALRM, SIGPROF, SIGWINCH, SIGIO, SIGPWR. The synchronous ones
// (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS, SIGABRT, SIGPIPE, SIGXFSZ) stay with the
// thread that caused them.
#include <sys/types.h>

namespace asteria {

void route_async_signals_to_signal_thread();

// The signal thread's kernel thread id (gettid), or 0 before the routing.
pid_t signal_thread_id();

}  // namespace asteria
