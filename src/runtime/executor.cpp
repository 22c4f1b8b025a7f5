#include "runtime/executor.hpp"

#include "core/error.hpp"
#include "core/timer.hpp"

namespace asteria {

Executor::Executor(WorkerPool* host_pool) : pool_(host_pool) {
  for (int lane = 0; lane < 2; ++lane) lanes_[lane] = std::thread([this, lane] { lane_loop(lane); });
}

Executor::~Executor() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (std::thread& t : lanes_) t.join();
}

void Executor::bind(OpKind kind, Handler h) { handlers_[static_cast<int>(kind)] = std::move(h); }
void Executor::bind_host(OpKind kind, HostHandler h) { host_handlers_[static_cast<int>(kind)] = std::move(h); }

void Executor::reset_times() {
  seconds_.fill(0.0);
  wait_s_.fill(0.0);
  compute_wait_s_ = 0;
}

void Executor::check_ready(const Op& op) {
  for (int d : op.deps)
    ASTERIA_ASSERT(done_[d], "op ", op.id, " (", to_string(op.kind), ") runs before its dependency ", d);
  for (const ResidencyCheck& resident : residency_)
    for (const auto* refs : {&op.reads, &op.writes})
      for (const StateRef& r : *refs)
        ASTERIA_ASSERT(resident(op, r), "op ", op.id, " (", to_string(op.kind), ") touches ", to_string(r.kind),
                       " of layer ", r.layer, ", which is not resident");
}

void Executor::mark_done(int id) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    done_[id] = 1;
  }
  cv_.notify_all();
}

// Waits until every dependency of op has finished. Dependencies come earlier in the plan (the
// builder guarantees it); a compute op's compute dependencies have run already, so only staging
// and comm dependencies are waited for. Host ops never finish within a plan: depending on one is a
// planning bug (host results are consumed through their owner).
void Executor::wait_for(const Op& op, bool count_stall) {
  for (int d : op.deps) {
    ASTERIA_ASSERT(d < op.id, "op ", op.id, " (", to_string(op.kind), ") runs before its dependency ", d);
    ASTERIA_ASSERT(plan_->ops[d].lane != Lane::Host, "op ", op.id, " (", to_string(op.kind),
                   ") depends on host-lane op ", d);
  }
  std::unique_lock<std::mutex> lock(mu_);
  auto ready = [&] {
    for (int d : op.deps)
      if (!done_[d]) return false;
    return true;
  };
  // A failed staging or comm op marks itself done: the compute lane must not run on what it left.
  if (count_stall && lane_error_) std::rethrow_exception(lane_error_);
  if (ready()) return;
  if (op.lane == Lane::Compute)
    for (int d : op.deps)
      ASTERIA_ASSERT(done_[d] || plan_->ops[d].lane == Lane::Staging || plan_->ops[d].lane == Lane::Comm, "op ", op.id,
                     " (", to_string(op.kind),
                     ") runs before its dependency ", d);
  Timer t;
  // A lane op whose dependency failed gives up too (the error is rethrown by run()).
  cv_.wait(lock, [&] { return ready() || lane_error_; });
  if (count_stall) {
    compute_wait_s_ += t.seconds();
    wait_s_[static_cast<int>(op.kind)] += t.seconds();
    if (lane_error_) std::rethrow_exception(lane_error_);
  }
}

void Executor::run_op(const Op& op) {
  const Handler& h = handlers_[static_cast<int>(op.kind)];
  ASTERIA_ASSERT(h, "no handler bound for op kind ", to_string(op.kind));
  check_ready(op);
  Timer t;
  h(op);
  seconds_[static_cast<int>(op.kind)] += t.seconds();
}

void Executor::lane_loop(int lane) {
  std::deque<int>& queue = queues_[lane];
  for (;;) {
    int id;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || !queue.empty(); });
      if (stop_ && queue.empty()) return;
      id = queue.front();
      queue.pop_front();
    }
    const Op& op = plan_->ops[id];
    bool skip;
    {
      std::lock_guard<std::mutex> lock(mu_);
      skip = static_cast<bool>(lane_error_);
    }
    if (!skip) wait_for(op, false);
    {
      std::lock_guard<std::mutex> lock(mu_);
      skip = static_cast<bool>(lane_error_);
    }
    try {
      if (skip) {
        // A staging or comm op failed: the rest of the plan is abandoned.
      } else if (op.lane == Lane::Host) {
        // Submitted in plan order once its (staging / compute) dependencies finished.
        const HostHandler& h = host_handlers_[static_cast<int>(op.kind)];
        ASTERIA_ASSERT(h && pool_, "no host handler or worker pool for op kind ", to_string(op.kind));
        check_ready(op);
        Op copy = op;
        pool_->submit([h, copy](int worker) { h(copy, worker); });
      } else {
        run_op(op);
      }
    } catch (...) {
      std::lock_guard<std::mutex> lock(mu_);
      if (!lane_error_) lane_error_ = std::current_exception();
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      --outstanding_;
      if (op.lane != Lane::Host) done_[id] = 1;
    }
    cv_.notify_all();
  }
}

void Executor::run(const Plan& plan) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    plan_ = &plan;
    done_.assign(plan.ops.size(), 0);
    outstanding_ = 0;
    lane_error_ = nullptr;
  }
  try {
    run_compute(plan);
  } catch (...) {
    // The staging and comm lanes still read the plan: let them finish (or skip) their queues first.
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!lane_error_) lane_error_ = std::current_exception();
    }
    cv_.notify_all();
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return outstanding_ == 0; });
    std::rethrow_exception(lane_error_);
  }
  std::unique_lock<std::mutex> lock(mu_);
  Timer t;
  cv_.wait(lock, [this] { return outstanding_ == 0; });
  compute_wait_s_ += t.seconds();
  if (lane_error_) std::rethrow_exception(lane_error_);
}

void Executor::run_compute(const Plan& plan) {
  for (const Op& op : plan.ops) {
    if (op.lane == Lane::Compute) {
      wait_for(op, true);
      run_op(op);
      mark_done(op.id);
    } else {
      {
        std::lock_guard<std::mutex> lock(mu_);
        queues_[op.lane == Lane::Comm ? 1 : 0].push_back(op.id);
        ++outstanding_;
      }
      cv_.notify_all();
    }
  }
}

}  // namespace asteria
