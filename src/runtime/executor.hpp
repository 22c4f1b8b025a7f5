#pragma once
// Runs a plan over its lanes:
//   compute  ops run on the calling thread, in plan order;
//   staging  ops run in plan order on the executor's staging thread (tier moves, snapshots,
//            the checkpoint copy);
//   comm     ops run in plan order on the executor's comm thread (collectives: parameter
//            gathers, gradient reductions, coherence syncs), on communicators of their own
//            (comm/communicator.hpp "Threads");
//   host     ops are handed, in plan order and once their dependencies finished, to the host
//            worker pool (shadow root jobs); they outlive the step: whoever consumes their
//            results waits for them (the shadow pipeline's publish barrier), not the executor.
// A staging or comm op is queued when the compute lane reaches it in plan order, then waits for
// its dependencies on its own thread. Before an op runs, the executor checks that each
// dependency has finished (a compute op waits for staging and comm dependencies and the wait
// is counted as stall, by the kind of the op that waited) and that every state it touches is
// resident (through the residency checks installed: the tiers', the offloaded parameters'); a
// violation is a bug and aborts loudly. run() returns when every compute, staging and comm op of the plan has finished
// and every host op was submitted. Time spent per op kind is accumulated for the metrics.
// An exception thrown by a staging or comm op (a disk tier checksum error, a collective's
// timeout) skips the rest of both queues and is rethrown by run() on the calling thread, after
// both lanes stopped touching the plan; so is one thrown by a compute op.
#include <array>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "runtime/plan.hpp"
#include "runtime/worker_pool.hpp"

namespace asteria {

class Executor {
 public:
  using Handler = std::function<void(const Op&)>;
  using HostHandler = std::function<void(const Op&, int worker)>;
  // Whether `ref` is resident where `op` needs it.
  using ResidencyCheck = std::function<bool(const Op& op, const StateRef& ref)>;

  // host_pool may be null when plans never use the host lane.
  explicit Executor(WorkerPool* host_pool = nullptr);
  ~Executor();
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  // One handler per op kind, installed by the subsystem that owns the kind.
  void bind(OpKind kind, Handler h);
  void bind_host(OpKind kind, HostHandler h);
  // Each subsystem whose state may be out of memory installs its own check; an op runs only
  // when every check agrees.
  void add_residency_check(ResidencyCheck check) { residency_.push_back(std::move(check)); }

  void run(const Plan& plan);

  // Seconds spent in each op kind since the last reset (staging ops: on the staging thread).
  double seconds(OpKind kind) const { return seconds_[static_cast<int>(kind)]; }
  // Seconds the compute lane waited for staging ops since the last reset: in total (including
  // the wait for the staging lane to drain at the end of the plan), and by the kind of the
  // compute op that waited (a tier_wait's wait is the tier stall).
  double compute_wait_seconds() const { return compute_wait_s_; }
  double wait_seconds(OpKind waiting_kind) const { return wait_s_[static_cast<int>(waiting_kind)]; }
  void reset_times();

 private:
  void check_ready(const Op& op);
  void run_op(const Op& op);
  void mark_done(int id);
  void wait_for(const Op& op, bool count_stall);
  void lane_loop(int lane);   // 0: staging (and host submission), 1: comm
  void run_compute(const Plan& plan);

  std::array<Handler, kNumOpKinds> handlers_;
  std::array<HostHandler, kNumOpKinds> host_handlers_;
  std::array<double, kNumOpKinds> seconds_{};
  std::array<double, kNumOpKinds> wait_s_{};
  double compute_wait_s_ = 0;
  std::exception_ptr lane_error_;   // guarded by mu_
  std::vector<ResidencyCheck> residency_;
  WorkerPool* pool_;

  const Plan* plan_ = nullptr;
  std::vector<uint8_t> done_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::array<std::deque<int>, 2> queues_;   // staging, comm
  int outstanding_ = 0;                     // queued or running staging and comm ops
  bool stop_ = false;
  std::array<std::thread, 2> lanes_;
};

}  // namespace asteria
