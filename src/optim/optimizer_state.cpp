// Optimizer's checkpoint fields (optimizer.hpp; core/stateful.hpp).
#include "optim/optimizer.hpp"

namespace asteria {

void Optimizer::save_state(StateWriter& out) {
  for (const OptimizerCounters& c : counters()) out.put_ints("counters." + c.name, c.values);
}

void Optimizer::load_state(const StateReader& in) {
  // The names are this optimizer's own (they do not change as it runs); each is read, so a
  // missing one is named with the file.
  std::vector<OptimizerCounters> saved;
  for (const OptimizerCounters& c : counters()) saved.push_back({c.name, in.ints("counters." + c.name)});
  restore_counters(saved);
}

}  // namespace asteria
