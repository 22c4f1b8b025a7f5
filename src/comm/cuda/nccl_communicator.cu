#include <nccl.h>

#include <string>
#include <vector>

#include "core/cuda/cuda_check.hpp"
#include "comm/nccl_communicator.hpp"

namespace asteria {

namespace {

void check(ncclResult_t rc, const char* call, const std::string& label) {
  if (rc != ncclSuccess) fail(label, ": ", call, " failed: ", ncclGetErrorString(rc));
}

#define ASTERIA_NCCL(call, label) check((call), #call, (label))

// Done when the event recorded after the operation has passed.
struct NcclRequest final : Request::Impl {
  explicit NcclRequest(cudaEvent_t e) : event(e) {}
  ~NcclRequest() override { cudaEventDestroy(event); }
  bool test() override {
    const cudaError_t rc = cudaEventQuery(event);
    if (rc == cudaErrorNotReady) return false;
    ASTERIA_CUDA_CHECK(rc);
    return true;
  }
  cudaEvent_t event;
};

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(ncclComm_t comm, int device) : comm_(comm), device_(device) {
    ASTERIA_CUDA_CHECK(cudaSetDevice(device_));
    int lo = 0, hi = 0;
    ASTERIA_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&lo, &hi));
    // The comm stream first in line: a collective holds up the ranks waiting for it.
    ASTERIA_CUDA_CHECK(cudaStreamCreateWithPriority(&stream_, cudaStreamNonBlocking, hi));
    ASTERIA_NCCL(ncclCommUserRank(comm_, &rank_), "nccl");
    ASTERIA_NCCL(ncclCommCount(comm_, &size_), "nccl");
    ASTERIA_CUDA_CHECK(cudaMalloc(&barrier_word_, sizeof(float)));
  }
  ~NcclCommunicator() override {
    // A collective still running (a wait() gave up on a dead or stalled rank) never finishes:
    // abort it instead of waiting for it, so that the job ends.
    if (cudaStreamQuery(stream_) == cudaErrorNotReady) {
      ncclCommAbort(comm_);
    } else {
      ncclCommDestroy(comm_);
    }
    cudaGetLastError();
    cudaFree(barrier_word_);
    cudaStreamDestroy(stream_);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string kind() const override { return "nccl"; }

  Request all_gather(const float* send, size_t count, float* recv, std::string label) override {
    ASTERIA_NCCL(ncclAllGather(send, recv, count, ncclFloat, comm_, stream_), label);
    return done(std::move(label));
  }
  Request reduce_scatter(const float* send, float* recv, size_t count, std::string label) override {
    ASTERIA_NCCL(ncclReduceScatter(send, recv, count, ncclFloat, ncclSum, comm_, stream_), label);
    return done(std::move(label));
  }
  Request all_gatherv(float* data, const std::vector<int>& counts, const std::vector<int>& offsets,
                      std::string label) override {
    check_parts(counts, label);
    ASTERIA_NCCL(ncclGroupStart(), label);
    for (int r = 0; r < size_; ++r)
      if (counts[r] > 0) {
        float* part = data + offsets[r];
        ASTERIA_NCCL(ncclBroadcast(part, part, static_cast<size_t>(counts[r]), ncclFloat, r, comm_, stream_), label);
      }
    ASTERIA_NCCL(ncclGroupEnd(), label);
    return done(std::move(label));
  }
  Request reduce_scatterv(const float* send, float* recv, const std::vector<int>& counts, std::string label) override {
    check_parts(counts, label);
    ASTERIA_NCCL(ncclGroupStart(), label);
    size_t at = 0;
    for (int r = 0; r < size_; ++r) {
      // recv is read by NCCL on the root only.
      if (counts[r] > 0)
        ASTERIA_NCCL(ncclReduce(send + at, recv, static_cast<size_t>(counts[r]), ncclFloat, ncclSum, r, comm_, stream_), label);
      at += static_cast<size_t>(counts[r]);
    }
    ASTERIA_NCCL(ncclGroupEnd(), label);
    return done(std::move(label));
  }
  Request all_reduce(double* data, size_t count, std::string label) override {
    ASTERIA_NCCL(ncclAllReduce(data, data, count, ncclDouble, ncclSum, comm_, stream_), label);
    return done(std::move(label));
  }
  Request all_reduce(float* data, size_t count, std::string label) override {
    ASTERIA_NCCL(ncclAllReduce(data, data, count, ncclFloat, ncclSum, comm_, stream_), label);
    return done(std::move(label));
  }
  Request broadcast(void* data, size_t bytes, int root, std::string label) override {
    ASTERIA_NCCL(ncclBroadcast(data, data, bytes, ncclChar, root, comm_, stream_), label);
    return done(std::move(label));
  }
  Request send(const void* data, size_t bytes, int dest, int /*tag: NCCL pairs in call order*/, std::string label) override {
    ASTERIA_NCCL(ncclSend(data, bytes, ncclChar, dest, comm_, stream_), label);
    return done(std::move(label));
  }
  Request recv(void* data, size_t bytes, int src, int /*tag*/, std::string label) override {
    ASTERIA_NCCL(ncclRecv(data, bytes, ncclChar, src, comm_, stream_), label);
    return done(std::move(label));
  }
  void barrier(const std::string& label) override {
    Request r = all_reduce(barrier_word_, 1, label);
    wait(r);
  }
  std::unique_ptr<Communicator> split(int color, int key) override {
    ncclComm_t part = nullptr;
    ASTERIA_NCCL(ncclCommSplit(comm_, color, key, &part, nullptr), "split of the NCCL communicator");
    auto c = std::make_unique<NcclCommunicator>(part, device_);
    c->set_timeout(timeout());
    return c;
  }

 private:
  Request done(std::string label) {
    cudaEvent_t e = nullptr;
    ASTERIA_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    ASTERIA_CUDA_CHECK(cudaEventRecord(e, stream_));
    return Request(std::make_unique<NcclRequest>(e), std::move(label));
  }
  void check_parts(const std::vector<int>& counts, const std::string& label) const {
    ASTERIA_CHECK(static_cast<int>(counts.size()) == size_, label, ": ", counts.size(), " part counts for ", size_, " ranks");
  }

  ncclComm_t comm_;
  int device_;
  int rank_ = 0, size_ = 1;
  cudaStream_t stream_ = nullptr;
  float* barrier_word_ = nullptr;
};

}  // namespace

std::unique_ptr<Communicator> make_nccl_communicator(Communicator& bootstrap, int device) {
  ASTERIA_CUDA_CHECK(cudaSetDevice(device));
  ncclUniqueId id{};
  if (bootstrap.rank() == 0) ASTERIA_NCCL(ncclGetUniqueId(&id), "the NCCL unique id");
  Request r = bootstrap.broadcast(&id, sizeof id, 0, "broadcast of the NCCL unique id");
  bootstrap.wait(r);
  ncclComm_t comm = nullptr;
  ASTERIA_NCCL(ncclCommInitRank(&comm, bootstrap.size(), id, bootstrap.rank()), "ncclCommInitRank");
  auto c = std::make_unique<NcclCommunicator>(comm, device);
  c->set_timeout(bootstrap.timeout());
  return c;
}

}  // namespace asteria
