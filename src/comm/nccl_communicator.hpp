#pragma once
// The Communicator of the CUDA backend (comm/communicator.hpp's contract) over NCCL: every
// buffer is device memory, every collective runs on the communicator's own stream (the comm
// stream), and a Request is an event recorded after it, so wait() returns when the device has
// finished it. The NCCL unique id travels over `bootstrap` (the MPI communicator of the launch,
// or a local one on one rank): its rank 0 makes the id and broadcasts it.
//
// What differs from MPI: NCCL has no tags, so send/recv pair up in call order between two ranks
// (the callers already issue them in plan order); all_gatherv / reduce_scatterv are one group of
// broadcasts / reductions, one per rank's part; each rank needs its own GPU (NCCL refuses two
// ranks on one device). Builds with the CUDA backend only; elsewhere make_nccl_communicator
// fails with the reason.
#include <memory>

#include "comm/communicator.hpp"

namespace asteria {

// Collective over bootstrap's ranks: every rank calls it, with the CUDA device it computes on.
std::unique_ptr<Communicator> make_nccl_communicator(Communicator& bootstrap, int device);

}  // namespace asteria
