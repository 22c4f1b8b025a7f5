#include "comm/mpi_communicator.hpp"

#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

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

int world_rank() {
  int initialized = 0, finalized = 0, rank = -1;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

// An MPI request dropped before it completed (its waiter gave up: a timeout, or an error on
// the way) leaves the ranks it was to meet waiting and MPI writing into memory the program may
// reuse: the job cannot go on. The error's own path ends it (asteria-train's main calls
// abort_all_ranks); should the process still be alive kAbandonedGraceS later (an unwinding that
// blocks, an error path that does not end the job), this watchdog ends the job itself.
constexpr int kAbandonedGraceS = 10;
constexpr int kAbortGraceS = 10;
std::atomic<bool> g_watchdog_armed{false};

void arm_abandoned_request_watchdog(const std::string& label) {
  if (g_watchdog_armed.exchange(true)) return;
  const int rank = world_rank();
  std::thread([label, rank] {
    std::this_thread::sleep_for(std::chrono::seconds(kAbandonedGraceS));
    std::fprintf(stderr,
                 "asteria: rank %d: '%s' was abandoned unfinished %d s ago and this rank has not ended; "
                 "ending the job (MPI_Abort)\n",
                 rank, label.c_str(), kAbandonedGraceS);
    abort_all_ranks(1);
  }).detach();
}

struct MpiRequest final : Request::Impl {
  explicit MpiRequest(const std::string& l) : label(l) {}
  ~MpiRequest() override {
    // A nonblocking collective cannot be cancelled or freed (MPI 3.1, 5.12): it stays pending.
    if (req != MPI_REQUEST_NULL && world_rank() >= 0) arm_abandoned_request_watchdog(label);
  }
  bool test() override {
    int done = 0;
    // An error (a peer's connection lost, under a launcher that does not end the job) ends
    // this wait instead of reading as "not yet" until the timeout, or as done.
    const int rc = MPI_Test(&req, &done, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) {
      req = MPI_REQUEST_NULL;   // not pending any more as far as MPI reports
      try {
        check(rc, "MPI_Test", label);
      } catch (const Error& e) {
        throw CommError(e.what());   // the transport failed: a peer or its link was lost
      }
    }
    return done != 0;
  }
  MPI_Request req = MPI_REQUEST_NULL;
  std::string label;
};

// Buffers a ring reduce-scatter keeps between its rounds, handed from one call to the next so
// that a step allocates nothing (a communicator's collectives run one after the other).
struct ScratchPool {
  std::mutex mu;
  std::vector<std::vector<float>> free;
  std::vector<float> take(size_t n) {
    std::vector<float> v;
    {
      std::lock_guard<std::mutex> lock(mu);
      if (!free.empty()) {
        v = std::move(free.back());
        free.pop_back();
      }
    }
    if (v.size() < n) v.resize(n);
    return v;
  }
  void give(std::vector<float> v) {
    std::lock_guard<std::mutex> lock(mu);
    free.push_back(std::move(v));
  }
};

// Reduce-scatter along a ring of p ranks, advanced by test() (so Communicator::wait's timeout and
// a lost peer's error apply as to any request). Part c's sum starts at rank c+1 and travels
// right, each rank adding its own part c, for p-1 rounds, to end complete at rank c: in round k
// rank r receives from r-1 the partial sum of part (r-k-2) mod p, adds its own, and sends it on
// in round k+1; its first send is its own part (r-1) mod p. Every link carries (p-1)/p of the
// buffer, all of them in both directions at once. Open MPI's nonblocking reduce-scatter (libnbc)
// instead reduces the whole buffer into rank 0 along a binomial tree and scatters from there:
// at 2 ranks 1.5 buffers cross rank 0's link one direction at a time, against half a buffer each
// way at once here. The sums' order is fixed (rank c+1 first, rank c last): the same bits on
// every run. Messages use tag kRingTag, which no other caller of a communicator uses.
constexpr int kRingTag = 0;

struct RingReduceScatter final : Request::Impl {
  RingReduceScatter(MPI_Comm comm, int rank, int size, const float* send, float* recv, const std::vector<int>& counts,
                    std::shared_ptr<ScratchPool> pool, std::string label)
      : comm_(comm), rank_(rank), size_(size), send_(send), recv_(recv), counts_(counts), pool_(std::move(pool)),
        label_(std::move(label)) {
    offsets_.assign(counts_.size() + 1, 0);
    size_t largest = 0;
    for (size_t i = 0; i < counts_.size(); ++i) {
      offsets_[i + 1] = offsets_[i] + static_cast<size_t>(counts_[i]);
      largest = std::max(largest, static_cast<size_t>(counts_[i]));
    }
    largest_ = largest;
    // The last round receives into recv while it reads this rank's part of send.
    ASTERIA_ASSERT(recv_ + counts_[rank_] <= send_ || recv_ >= send_ + offsets_.back(), label_,
                   ": reduce_scatterv's recv overlaps send");
    scratch_ = pool_->take(2 * largest);
    start_round();
  }
  ~RingReduceScatter() override {
    if (!pending()) {
      pool_->give(std::move(scratch_));
      return;
    }
    // MPI may still write into the buffer: it is kept (leaked) until the job ends, which the
    // watchdog makes sure of.
    new std::vector<float>(std::move(scratch_));
    if (world_rank() >= 0) arm_abandoned_request_watchdog(label_);
  }
  bool test() override {
    while (round_ < size_ - 1) {
      int done = 0;
      const int rc = MPI_Testall(2, reqs_, &done, MPI_STATUSES_IGNORE);
      if (rc != MPI_SUCCESS) {
        reqs_[0] = reqs_[1] = MPI_REQUEST_NULL;
        try {
          check(rc, "MPI_Testall (ring reduce-scatter)", label_);
        } catch (const Error& e) {
          throw CommError(e.what());
        }
      }
      if (!done) return false;
      // Round round_'s part arrived: add this rank's own.
      const int part = part_received(round_);
      float* acc = received_into(round_);
      const float* own = send_ + offsets_[part];
      for (int i = 0; i < counts_[part]; ++i) acc[i] += own[i];
      ++round_;
      if (round_ < size_ - 1) start_round();
    }
    return true;
  }

 private:
  bool pending() const { return reqs_[0] != MPI_REQUEST_NULL || reqs_[1] != MPI_REQUEST_NULL; }
  int mod(int x) const { return ((x % size_) + size_) % size_; }
  int part_received(int k) const { return mod(rank_ - k - 2); }
  // The last round's part is this rank's: straight into recv.
  float* received_into(int k) { return k == size_ - 2 ? recv_ : scratch_.data() + (k % 2) * largest_; }
  void start_round() {
    const int k = round_;
    const int right = mod(rank_ + 1), left = mod(rank_ - 1);
    const int sent = mod(rank_ - k - 1);
    const float* out = k == 0 ? send_ + offsets_[sent] : received_into(k - 1);
    check(MPI_Irecv(received_into(k), counts_[part_received(k)], MPI_FLOAT, left, kRingTag, comm_, &reqs_[1]),
          "MPI_Irecv (ring reduce-scatter)", label_);
    check(MPI_Isend(out, counts_[sent], MPI_FLOAT, right, kRingTag, comm_, &reqs_[0]),
          "MPI_Isend (ring reduce-scatter)", label_);
  }

  MPI_Comm comm_;
  int rank_, size_;
  const float* send_;
  float* recv_;
  std::vector<int> counts_;
  std::vector<size_t> offsets_;
  size_t largest_ = 0;
  std::shared_ptr<ScratchPool> pool_;
  std::vector<float> scratch_;
  std::string label_;
  int round_ = 0;
  MPI_Request reqs_[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
};

// The test hook of mpi_communicator.hpp: ASTERIA_FAULT_STALL="<rank>:<label substring>:<seconds>".
struct StallHook {
  int rank = -1;
  std::string substring;
  double seconds = 0;
  std::atomic<bool> fired{false};
};

StallHook& stall_hook() {
  static StallHook* hook = [] {
    auto* h = new StallHook;
    const char* v = std::getenv("ASTERIA_FAULT_STALL");
    if (!v || !*v) return h;
    const std::string spec = v;
    const size_t a = spec.find(':'), b = spec.rfind(':');
    char* end = nullptr;
    bool ok = a != std::string::npos && b != a && a > 0 && b + 1 < spec.size();
    if (ok) {
      h->rank = static_cast<int>(std::strtol(spec.c_str(), &end, 10));
      ok = end == spec.c_str() + a && h->rank >= 0;
    }
    if (ok) {
      h->seconds = std::strtod(spec.c_str() + b + 1, &end);
      ok = *end == '\0' && h->seconds >= 0;
    }
    if (!ok) {
      h->rank = -1;
      fail("ASTERIA_FAULT_STALL='", excerpt(spec), "': expected <rank>:<label substring>:<seconds>, e.g. "
           "1:the gradient of blocks.0:120");
    }
    h->substring = spec.substr(a + 1, b - a - 1);
    return h;
  }();
  return *hook;
}

void stall_if_asked(const std::string& label) {
  StallHook& h = stall_hook();
  if (h.rank < 0 || label.find(h.substring) == std::string::npos || world_rank() != h.rank) return;
  if (h.fired.exchange(true)) return;
  std::fprintf(stderr, "asteria: fault injection (ASTERIA_FAULT_STALL): rank %d sleeps %g s before starting '%s'\n",
               h.rank, h.seconds, label.c_str());
  std::this_thread::sleep_for(std::chrono::duration<double>(h.seconds));
}

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
  int max_tag() const override {
    void* value = nullptr;
    int found = 0;
    MPI_Comm_get_attr(comm_, MPI_TAG_UB, &value, &found);
    return found ? *static_cast<int*>(value) : 32767;
  }

  Request all_gather(const float* send, size_t count, float* recv, std::string label) override {
    stall_if_asked(label);
    auto r = std::make_unique<MpiRequest>(label);
    check(MPI_Iallgather(send == recv + rank_ * count ? MPI_IN_PLACE : send, int_count(count, label), MPI_FLOAT, recv,
                         int_count(count, label), MPI_FLOAT, comm_, &r->req),
          "MPI_Iallgather", label);
    return {std::move(r), std::move(label)};
  }
  Request reduce_scatter(const float* send, float* recv, size_t count, std::string label) override {
    return reduce_scatterv(send, recv, std::vector<int>(static_cast<size_t>(size_), int_count(count, label)),
                           std::move(label));
  }
  Request all_gatherv(float* data, const std::vector<int>& counts, const std::vector<int>& offsets,
                      std::string label) override {
    stall_if_asked(label);
    ASTERIA_ASSERT(static_cast<int>(counts.size()) == size_ && static_cast<int>(offsets.size()) >= size_, label);
    auto r = std::make_unique<MpiRequest>(label);
    check(MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, data, counts.data(), offsets.data(), MPI_FLOAT, comm_,
                          &r->req),
          "MPI_Iallgatherv", label);
    return {std::move(r), std::move(label)};
  }
  Request reduce_scatterv(const float* send, float* recv, const std::vector<int>& counts, std::string label) override {
    stall_if_asked(label);
    ASTERIA_ASSERT(static_cast<int>(counts.size()) == size_, label);
    if (size_ == 1) {
      if (send != recv) std::memmove(recv, send, static_cast<size_t>(counts[0]) * sizeof(float));
      return {};
    }
    auto r = std::make_unique<RingReduceScatter>(comm_, rank_, size_, send, recv, counts, scratch_, label);
    return {std::move(r), std::move(label)};
  }
  Request all_reduce(double* data, size_t count, std::string label) override {
    stall_if_asked(label);
    auto r = std::make_unique<MpiRequest>(label);
    check(MPI_Iallreduce(MPI_IN_PLACE, data, int_count(count, label), MPI_DOUBLE, MPI_SUM, comm_, &r->req),
          "MPI_Iallreduce", label);
    return {std::move(r), std::move(label)};
  }
  Request all_reduce(float* data, size_t count, std::string label) override {
    stall_if_asked(label);
    auto r = std::make_unique<MpiRequest>(label);
    check(MPI_Iallreduce(MPI_IN_PLACE, data, int_count(count, label), MPI_FLOAT, MPI_SUM, comm_, &r->req),
          "MPI_Iallreduce", label);
    return {std::move(r), std::move(label)};
  }
  Request broadcast(void* data, size_t bytes, int root, std::string label) override {
    stall_if_asked(label);
    auto r = std::make_unique<MpiRequest>(label);
    check(MPI_Ibcast(data, int_count(bytes, label), MPI_BYTE, root, comm_, &r->req), "MPI_Ibcast", label);
    return {std::move(r), std::move(label)};
  }
  Request send(const void* data, size_t bytes, int dest, int tag, std::string label) override {
    stall_if_asked(label);
    auto r = std::make_unique<MpiRequest>(label);
    check(MPI_Isend(data, int_count(bytes, label), MPI_BYTE, dest, tag, comm_, &r->req), "MPI_Isend", label);
    return {std::move(r), std::move(label)};
  }
  Request recv(void* data, size_t bytes, int src, int tag, std::string label) override {
    stall_if_asked(label);
    auto r = std::make_unique<MpiRequest>(label);
    check(MPI_Irecv(data, int_count(bytes, label), MPI_BYTE, src, tag, comm_, &r->req), "MPI_Irecv", label);
    return {std::move(r), std::move(label)};
  }
  void barrier(const std::string& label) override {
    stall_if_asked(label);
    auto r = std::make_unique<MpiRequest>(label);
    check(MPI_Ibarrier(comm_, &r->req), "MPI_Ibarrier", label);
    Request req(std::move(r), label);
    wait(req);
  }
  std::unique_ptr<Communicator> split(int color, int key) override {
    // MPI_Comm_split blocks without a timeout: first meet every rank in a barrier that has one,
    // so a rank that stalls before the split ends the job instead of hanging it.
    barrier("the ranks' split of a communicator (MPI_Comm_split)");
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
  std::shared_ptr<ScratchPool> scratch_ = std::make_shared<ScratchPool>();
};

}  // namespace

static const char* thread_level_name(int level) {
  switch (level) {
    case MPI_THREAD_SINGLE: return "MPI_THREAD_SINGLE";
    case MPI_THREAD_FUNNELED: return "MPI_THREAD_FUNNELED";
    case MPI_THREAD_SERIALIZED: return "MPI_THREAD_SERIALIZED";
    case MPI_THREAD_MULTIPLE: return "MPI_THREAD_MULTIPLE";
    default: return "an unknown thread level";
  }
}

// Open MPI's nonblocking collectives (coll/libnbc) all-reduce along a binomial tree -- every
// rank's buffer reduced into rank 0, the sum broadcast back -- for every in-place call and every
// group of fewer than 4 ranks, whatever the size: each byte crosses rank 0's link twice, one
// direction at a time (at 2 replicas, twice the time the link needs). The ring moves 2(p-1)/p of
// the buffer each way, all links in both directions at once, and gives every rank the same bits.
// Taken unless the user chose an algorithm (in the environment, or `mpirun --mca`, which passes it
// there). Before MPI_Init: Open MPI reads its parameters then.
constexpr const char* kAllReduceAlgorithmVar = "OMPI_MCA_coll_libnbc_iallreduce_algorithm";
constexpr const char* kAllReduceRing = "1";

MpiSession::MpiSession(int* argc, char*** argv) {
  setenv(kAllReduceAlgorithmVar, kAllReduceRing, /*overwrite=*/0);
  int provided = 0;
  MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided);
  if (provided < MPI_THREAD_MULTIPLE) {
    char version[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    MPI_Get_library_version(version, &len);
    std::string lib(version, static_cast<size_t>(len));
    lib = lib.substr(0, lib.find_first_of(",\n"));
    MPI_Finalize();
    fail("this MPI (", lib, ") provides ", thread_level_name(provided), "; asteria needs MPI_THREAD_MULTIPLE (its "
         "compute lane, comm lane and coherence protocol call MPI from their own threads at once); use an MPI built "
         "with thread support (Open MPI 3 or later is by default)");
  }
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
  // MPI_Abort asks the launcher to end every rank; where the launcher cannot be reached (this
  // host's link is down) it may never return. This rank ends itself kAbortGraceS later anyway,
  // so that a rank's exit is bounded by distributed.timeout_s + kAbortGraceS.
  std::thread([code] {
    std::this_thread::sleep_for(std::chrono::seconds(kAbortGraceS));
    std::fprintf(stderr, "asteria: rank %d: MPI_Abort did not end this rank within %d s (launcher unreachable?); exiting\n",
                 world_rank(), kAbortGraceS);
    std::_Exit(code);
  }).detach();
  MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);
}

std::unique_ptr<Communicator> make_mpi_world_communicator() {
  MPI_Comm world;
  check(MPI_Comm_dup(MPI_COMM_WORLD, &world), "MPI_Comm_dup", "world");
  return std::make_unique<MpiCommunicator>(world);
}

}  // namespace asteria
