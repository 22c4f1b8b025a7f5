#pragma once
// The Open MPI communicator (communicator.hpp). MpiSession initializes MPI once per process at
// MPI_THREAD_MULTIPLE (the compute lane, the comm lane and the shadow pipeline's coherence each
// call MPI on communicators of their own, at the same time) and refuses, naming the level, an MPI
// that does not provide it; it finalizes MPI at the end. Communicators are created after it and
// destroyed before it ends. Errors of MPI calls are returned, not fatal, and become
// asteria::Error naming the call and the label (MPI_Test's too: a lost peer ends the wait with
// the label instead of running into the timeout).
//
// Faults (a dead or stalled rank; docs/DESIGN.md "FSDP"): no call here blocks without a timeout
// while the job runs. Collectives are nonblocking and Communicator::wait gives up after
// distributed.timeout_s with an Error naming the label (op and layer); the blocking
// MPI_Comm_split / MPI_Comm_split_type are preceded by a barrier that has the timeout. The
// error's path must then end every rank (abort_all_ranks, as asteria-train's main does): a
// collective cannot be cancelled, so the communicator is unusable. A request destroyed before it
// completed (its waiter gave up) arms a watchdog: if the process is still alive 10 s later
// (an error path that blocks or does not end the job), it prints the label and calls
// abort_all_ranks itself. A rank killed outright (kill -9) is the launcher's to report: mpirun
// ends the job at once ("mpirun noticed that process rank N ... exited on signal 9"), and so
// does srun --mpi=pmix (Slurm's PMIx plugin cancels the step: "task N: Killed"); under a
// launcher that does not, the survivors end at their next collective's timeout.
//
// Test hook (fault injection): ASTERIA_FAULT_STALL="<rank>:<label substring>:<seconds>" makes
// world rank <rank> sleep <seconds> (and say so on stderr) before it starts the first
// collective, point-to-point operation or barrier whose label contains the substring (the
// substring may contain ':'; rank and seconds are the first and last fields). Unset or empty:
// no effect; malformed: an Error at the first collective. Used by tests/integration/faults_test.cpp.
#include <memory>

#include "comm/communicator.hpp"

namespace asteria {

class MpiSession {
 public:
  MpiSession(int* argc, char*** argv);
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;
};

// Whether this process was started by mpirun / srun with more than one rank (from the
// launchers' environment), before MPI is initialized.
bool launched_with_several_ranks();

// Ends every rank of the job now with `code` (MPI_Abort): a failing rank must not leave the others
// waiting in a collective. This rank exits within 10 s even where MPI_Abort cannot reach the
// launcher (a host whose link is down).
[[noreturn]] void abort_all_ranks(int code);

// A duplicate of MPI_COMM_WORLD.
std::unique_ptr<Communicator> make_mpi_world_communicator();

}  // namespace asteria
