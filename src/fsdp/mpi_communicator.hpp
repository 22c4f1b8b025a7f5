#pragma once
// The Open MPI communicator (communicator.hpp). MpiSession initializes MPI once per process at
// MPI_THREAD_SERIALIZED (the comm lane makes the calls between init and finalize, never
// concurrently with another thread) and finalizes it; communicators are created after it and
// destroyed before it ends. Errors of MPI calls are returned, not fatal, and become
// asteria::Error naming the call and the label.
#include <memory>

#include "fsdp/communicator.hpp"

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
// waiting in a collective.
[[noreturn]] void abort_all_ranks(int code);

// A duplicate of MPI_COMM_WORLD.
std::unique_ptr<Communicator> make_mpi_world_communicator();

// The number of ranks on this rank's node (MPI_Comm_split_type shared memory), for `comm` (an
// MPI communicator; 1 for a local one).
int ranks_on_this_node(Communicator& comm);

}  // namespace asteria
