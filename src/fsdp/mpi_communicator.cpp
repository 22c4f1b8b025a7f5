#include "fsdp/mpi_communicator.hpp"

#include <mpi.h>

#include <cstdio>
#include <cstdlib>

#include "core/error.hpp"

namespace asteria {

namespace {

void check(int rc, const char* call, const std::string& label) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  fail(label, ": ", call, " failed: ", std::string(text, static_cast<size_t>(len)));
}

struct MpiRequest final : Request::Impl {
  MPI_Request req = MPI_REQUEST_NULL;
  bool test() override {
    int done = 0;
    MPI_Test(&req, &done, MPI_STATUS_IGNORE);
    return done != 0;
  }
};

class MpiCommunicator final : public Communicator {
 public:
  explicit MpiCommunicator(MPI_Comm comm) : comm_(comm) {
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
  }
  ~MpiCommunicator() override { MPI_Comm_free(&comm_); }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string kind() const override { return "mpi"; }
  MPI_Comm comm() const { return comm_; }

  Request all_gather(const float* send, size_t count, float* recv, std::string label) override {
    auto r = std::make_unique<MpiRequest>();
    check(MPI_Iallgather(send == recv + rank_ * count ? MPI_IN_PLACE : send, int_count(count, label), MPI_FLOAT, recv,
                         int_count(count, label), MPI_FLOAT, comm_, &r->req),
          "MPI_Iallgather", label);
    return {std::move(r), std::move(label)};
  }
  Request reduce_scatter(const float* send, float* recv, size_t count, std::string label) override {
    auto r = std::make_unique<MpiRequest>();
    check(MPI_Ireduce_scatter_block(send, recv, int_count(count, label), MPI_FLOAT, MPI_SUM, comm_, &r->req),
          "MPI_Ireduce_scatter_block", label);
    return {std::move(r), std::move(label)};
  }
  Request all_reduce(double* data, size_t count, std::string label) override {
    auto r = std::make_unique<MpiRequest>();
    check(MPI_Iallreduce(MPI_IN_PLACE, data, int_count(count, label), MPI_DOUBLE, MPI_SUM, comm_, &r->req),
          "MPI_Iallreduce", label);
    return {std::move(r), std::move(label)};
  }
  Request all_reduce(float* data, size_t count, std::string label) override {
    auto r = std::make_unique<MpiRequest>();
    check(MPI_Iallreduce(MPI_IN_PLACE, data, int_count(count, label), MPI_FLOAT, MPI_SUM, comm_, &r->req),
          "MPI_Iallreduce", label);
    return {std::move(r), std::move(label)};
  }
  Request broadcast(void* data, size_t bytes, int root, std::string label) override {
    auto r = std::make_unique<MpiRequest>();
    check(MPI_Ibcast(data, int_count(bytes, label), MPI_BYTE, root, comm_, &r->req), "MPI_Ibcast", label);
    return {std::move(r), std::move(label)};
  }
  Request send(const void* data, size_t bytes, int dest, int tag, std::string label) override {
    auto r = std::make_unique<MpiRequest>();
    check(MPI_Isend(data, int_count(bytes, label), MPI_BYTE, dest, tag, comm_, &r->req), "MPI_Isend", label);
    return {std::move(r), std::move(label)};
  }
  Request recv(void* data, size_t bytes, int src, int tag, std::string label) override {
    auto r = std::make_unique<MpiRequest>();
    check(MPI_Irecv(data, int_count(bytes, label), MPI_BYTE, src, tag, comm_, &r->req), "MPI_Irecv", label);
    return {std::move(r), std::move(label)};
  }
  void barrier(const std::string& label) override {
    auto r = std::make_unique<MpiRequest>();
    check(MPI_Ibarrier(comm_, &r->req), "MPI_Ibarrier", label);
    Request req(std::move(r), label);
    wait(req);
  }
  std::unique_ptr<Communicator> split(int color, int key) override {
    MPI_Comm sub;
    check(MPI_Comm_split(comm_, color, key, &sub), "MPI_Comm_split", "split");
    auto c = std::make_unique<MpiCommunicator>(sub);
    c->set_timeout(timeout_s_);
    return c;
  }

 private:
  static int int_count(size_t n, const std::string& label) {
    ASTERIA_CHECK(n <= static_cast<size_t>(INT32_MAX), label, ": ", n, " elements are more than one MPI call moves");
    return static_cast<int>(n);
  }
  MPI_Comm comm_;
  int rank_ = 0, size_ = 1;
};

}  // namespace

MpiSession::MpiSession(int* argc, char*** argv) {
  int provided = 0;
  MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided);
  if (provided < MPI_THREAD_SERIALIZED)
    fail("this MPI provides thread level ", provided, "; asteria needs MPI_THREAD_SERIALIZED (its comm lane is a thread)");
}

MpiSession::~MpiSession() { MPI_Finalize(); }

bool launched_with_several_ranks() {
  // mpirun sets OMPI_COMM_WORLD_SIZE; srun sets SLURM_STEP_NUM_TASKS in each task (SLURM_NTASKS is
  // also set in a batch script's single shell, which is no rank of several).
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_STEP_NUM_TASKS"}) {
    const char* v = std::getenv(var);
    if (v && std::atoi(v) > 1) return true;
  }
  return false;
}

void abort_all_ranks(int code) {
  std::fflush(stdout);
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);
}

std::unique_ptr<Communicator> make_mpi_world_communicator() {
  MPI_Comm world;
  check(MPI_Comm_dup(MPI_COMM_WORLD, &world), "MPI_Comm_dup", "world");
  return std::make_unique<MpiCommunicator>(world);
}

int ranks_on_this_node(Communicator& comm) {
  auto* mpi = dynamic_cast<MpiCommunicator*>(&comm);
  if (!mpi) return 1;
  MPI_Comm node;
  check(MPI_Comm_split_type(mpi->comm(), MPI_COMM_TYPE_SHARED, mpi->rank(), MPI_INFO_NULL, &node),
        "MPI_Comm_split_type", "topology");
  int n = 1;
  MPI_Comm_size(node, &n);
  MPI_Comm_free(&node);
  return n;
}

}  // namespace asteria
