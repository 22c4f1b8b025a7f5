#include "runtime/executor.hpp"

#include "core/error.hpp"
#include "core/timer.hpp"

namespace asteria {

void Executor::bind(OpKind kind, Handler h) { handlers_[static_cast<int>(kind)] = std::move(h); }

void Executor::run(const Plan& plan) {
  done_.assign(plan.ops.size(), 0);
  for (const Op& op : plan.ops) {
    ASTERIA_ASSERT(op.lane == Lane::Compute, "op ", op.id, " (", to_string(op.kind),
                   ") is on lane '", to_string(op.lane), "', which has no worker in this build");
    for (int d : op.deps)
      ASTERIA_ASSERT(done_[d], "op ", op.id, " (", to_string(op.kind), ") runs before its dependency ", d);
    if (residency_) {
      for (const auto* refs : {&op.reads, &op.writes})
        for (const StateRef& r : *refs)
          ASTERIA_ASSERT(residency_(r), "op ", op.id, " (", to_string(op.kind), ") touches ",
                         to_string(r.kind), " of layer ", r.layer, ", which is not resident");
    }
    const Handler& h = handlers_[static_cast<int>(op.kind)];
    ASTERIA_ASSERT(h, "no handler bound for op kind ", to_string(op.kind));
    Timer t;
    h(op);
    seconds_[static_cast<int>(op.kind)] += t.seconds();
    done_[op.id] = 1;
  }
}

}  // namespace asteria
