#include "optim/optimizer_description.hpp"

#include "core/error.hpp"

namespace asteria {

const std::vector<const OptimizerDescription*>& optimizer_descriptions() {
  // The registration: optim.name's choices, in this order.
  static const std::vector<const OptimizerDescription*> all = {&adamw_description(), &shampoo_description(),
                                                               &soap_description(), &kl_shampoo_description(),
                                                               &muon_description()};
  return all;
}

const OptimizerDescription& describe(OptimizerKind kind) {
  for (const OptimizerDescription* d : optimizer_descriptions())
    if (d->kind == kind) return *d;
  ASTERIA_ASSERT(false, "optimizer kind ", static_cast<int>(kind), " has no description");
  return *optimizer_descriptions().front();
}

OptimConfig optim_defaults(OptimizerKind kind) { return describe(kind).defaults(); }

}  // namespace asteria
