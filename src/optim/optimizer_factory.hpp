#pragma once
// Builds the configured optimizer, and accounts its state without building it (--dry-run).
#include <memory>
#include <string>
#include <vector>

#include "model/param_table.hpp"
#include "optim/optimizer.hpp"
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

// The second-order optimizer's parameters resolved from the config (shampoo_beta < 0 -> beta2).
SecondOrderParams second_order_params(const OptimConfig& o, bool stagger = false);

struct OptimizerStateBytes {
  size_t factors = 0;     // Kronecker factors (L, R / S_L, S_R)
  size_t roots = 0;       // inverse roots or eigenbases
  size_t moments = 0;     // moments, grafting state, eigenvalue estimates, direction buffers
  size_t adamw = 0;       // AdamW moments (all parameters for adamw; the 1-D ones otherwise)
  size_t compensation = 0;   // update compensation (one float per parameter when on)
  int64_t blocks = 0;
  size_t total() const { return factors + roots + moments + adamw + compensation; }
};
OptimizerStateBytes optimizer_state_bytes(const OptimConfig& o, const std::vector<ParamTable>& layers);

}  // namespace asteria
