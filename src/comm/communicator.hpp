#pragma once
// The collectives of sharded training (docs/DESIGN.md "FSDP") behind one interface, so that the
// trainer never calls MPI (or, with the CUDA backend, NCCL) itself:
//   local  one rank: every collective is a copy or a no-op;
//   mpi    Open MPI: nonblocking collectives (MPI_Iallgatherv, MPI_Iallreduce on its ring, ...)
//          and a reduce-scatter ring of nonblocking sends and receives (mpi_communicator.cpp).
//
// Contract. Every rank of a communicator calls the same collectives in the same order (ranks
// with nothing to contribute too: a rank that skips one hangs the others, so the callers
// follow the plan, which is the same on every rank). A call starts the operation and returns a
// Request; the buffers must stay untouched until wait() returns. wait() gives up after
// `timeout_s` (> 0) with an asteria::Error naming the request's label ("all_gather blocks.3"), so
// a dead or stalled rank ends the job instead of hanging it.
//
// Threads. MPI runs at MPI_THREAD_MULTIPLE: several threads may call at once, but only on
// different communicators. One communicator belongs to one thread at a time (its lane or
// subsystem: the compute lane's, the comm lane's, coherence's), because collectives match by their
// order on a communicator: two threads starting collectives on one communicator can start them
// in different orders on different ranks and pair the wrong ones. A subsystem that runs on
// another thread takes its own duplicate() (a new context: its messages can match no other
// communicator's). Point-to-point messages of one communicator are told apart by their tags.
//
// Layouts: all_gather(send[count]) -> recv[size * count], rank r's part at r * count;
// reduce_scatter(send[size * count]) -> recv[count] = the sum over ranks of their send part
// at rank * count; all_reduce in place; broadcast in place from `root`.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/error.hpp"

namespace asteria {

class Communicator;

// A collective or message that did not complete within the timeout, or that the transport
// failed: a rank, its host or its link was lost. asteria-train exits with its own code for it
// (kExitCommLost), which a batch script can requeue.
class CommError : public Error {
 public:
  using Error::Error;
};

// A started operation. Move-only; waiting on an empty request returns at once.
class Request {
 public:
  Request() = default;
  Request(Request&&) noexcept;
  Request& operator=(Request&&) noexcept;
  ~Request();
  bool empty() const { return !impl_; }
  const std::string& label() const { return label_; }

  struct Impl {
    virtual ~Impl() = default;
    virtual bool test() = 0;   // finished?
  };
  Request(std::unique_ptr<Impl> impl, std::string label);

 private:
  friend class Communicator;
  std::unique_ptr<Impl> impl_;
  std::string label_;
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::string kind() const = 0;   // "local", "mpi"

  virtual Request all_gather(const float* send, size_t count, float* recv, std::string label) = 0;
  virtual Request reduce_scatter(const float* send, float* recv, size_t count, std::string label) = 0;
  // Uneven parts without padding. counts and offsets must stay unchanged until wait() returns
  // (MPI reads them while the operation runs).
  // all_gatherv: rank r's part of `data` is [offsets[r], offsets[r] + counts[r]), the parts
  // disjoint in any order; every rank's part is filled in from its owner (each rank's own
  // part is in place). reduce_scatterv: the send buffer holds the parts in rank order (rank r's
  // starts after counts[0] + .. + counts[r-1]); recv[counts[rank]], apart from send, = the sum
  // over ranks of their send part for this rank, in a fixed order (the same bits on every run;
  // over MPI along a ring, tag 0 of the communicator reserved for it).
  virtual Request all_gatherv(float* data, const std::vector<int>& counts, const std::vector<int>& offsets,
                              std::string label) = 0;
  virtual Request reduce_scatterv(const float* send, float* recv, const std::vector<int>& counts, std::string label) = 0;
  virtual Request all_reduce(double* data, size_t count, std::string label) = 0;   // sum
  virtual Request all_reduce(float* data, size_t count, std::string label) = 0;    // sum
  virtual Request broadcast(void* data, size_t bytes, int root, std::string label) = 0;
  virtual Request send(const void* data, size_t bytes, int dest, int tag, std::string label) = 0;
  virtual Request recv(void* data, size_t bytes, int src, int tag, std::string label) = 0;
  virtual void barrier(const std::string& label) = 0;
  // The ranks with the same color, ordered by key (MPI_Comm_split); every rank calls it.
  virtual std::unique_ptr<Communicator> split(int color, int key) = 0;
  // The same ranks in the same order on a new context (every rank calls it), with this one's
  // timeout: for a lane or subsystem that must not share this communicator's message matching.
  std::unique_ptr<Communicator> duplicate() {
    auto d = split(0, rank());
    d->describe_members(members_);
    return d;
  }
  // Who the ranks are, for a timeout's message ("node1 (rank 0), node2 (rank 2)"; topology.hpp).
  void describe_members(std::string text) { members_ = std::move(text); }
  const std::string& members() const { return members_; }
  // The largest tag send/recv accept (MPI_TAG_UB; MPI guarantees at least 32767).
  virtual int max_tag() const { return 32767; }

  // Waits for `r` (then empty); an Error naming its label after timeout_s seconds.
  void wait(Request& r);
  void set_timeout(double seconds) { timeout_s_ = seconds; }
  double timeout() const { return timeout_s_; }

 protected:
  double timeout_s_ = 600;
  std::string members_;
};

std::unique_ptr<Communicator> make_local_communicator();

}  // namespace asteria
