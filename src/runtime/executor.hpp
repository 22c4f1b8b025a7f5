#pragma once
// Runs a plan. Compute-lane ops run on the calling thread, in plan order. Before an op runs the
// executor checks that each dependency has finished and that every state it touches is
// resident (through the residency check, when one is installed); a violation is a bug and
// aborts loudly. Lanes without a worker in this build (comm, staging, host) are refused when a
// plan uses them. Time spent per op kind is accumulated for the metrics.
#include <array>
#include <functional>

#include "runtime/plan.hpp"

namespace asteria {

class Executor {
 public:
  using Handler = std::function<void(const Op&)>;
  using ResidencyCheck = std::function<bool(const StateRef&)>;

  // One handler per op kind, installed by the subsystem that owns the kind.
  void bind(OpKind kind, Handler h);
  void set_residency_check(ResidencyCheck check) { residency_ = std::move(check); }

  void run(const Plan& plan);

  // Seconds spent in each op kind since the last reset.
  double seconds(OpKind kind) const { return seconds_[static_cast<int>(kind)]; }
  void reset_times() { seconds_.fill(0.0); }

 private:
  std::array<Handler, kNumOpKinds> handlers_;
  std::array<double, kNumOpKinds> seconds_{};
  ResidencyCheck residency_;
  std::vector<uint8_t> done_;
};

}  // namespace asteria
