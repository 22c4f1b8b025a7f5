#pragma once
// The configured optimizer, built or accounted without building it (--dry-run): each call asks
// the kind's description (optimizer_description.hpp).
#include <memory>
#include <string>
#include <vector>

#include "model/param_table.hpp"
#include "optim/optimizer.hpp"
#include "optim/optimizer_description.hpp"
#include "optim/second_order.hpp"
#include "optim/optim_config.hpp"

namespace asteria {

// `stagger`: runtime.stagger (second-order optimizers only). own_memory false: the caller binds
// the state tensors (the tiered state manager).
std::unique_ptr<Optimizer> make_optimizer(const OptimConfig& o, const std::vector<ParamTable>& layers,
                                          bool stagger = false, bool own_memory = true);

// The state tensors the optimizer would keep, per layer, in Optimizer::layer_states order,
// without building it (--dry-run, --print-plan, tier placement checks).
std::vector<std::vector<StateSpec>> optimizer_state_specs(const OptimConfig& o, const std::vector<ParamTable>& layers);

OptimizerStateBytes optimizer_state_bytes(const OptimConfig& o, const std::vector<ParamTable>& layers);

// Rows of a sharded layer's units for this optimizer (OptimizerDescription::shard_unit_rows).
int64_t shard_unit_rows(const OptimConfig& o);

// The second-order optimizer's parameters resolved from the config (shampoo_beta < 0 -> beta2).
SecondOrderParams second_order_params(const OptimConfig& o, bool stagger = false);

}  // namespace asteria
