#pragma once
// One description per optimizer kind, beside its code, and the one list of them: everything
// outside optim/ asks these (the config's defaults and checks, the estimates, placement, the
// shadow pipeline's and coherence's use, the backends) and never names a kind. Adding an
// optimizer is its code, its description and one line in optimizer_description.cpp's list.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "model/param_table.hpp"
#include "optim/optim_config.hpp"
#include "optim/optimizer.hpp"
#include "optim/state_tensor.hpp"

namespace asteria {

// Its state in bytes, by kind, for --dry-run and the estimates.
struct OptimizerStateBytes {
  size_t factors = 0;     // Kronecker factors (L, R / S_L, S_R)
  size_t roots = 0;       // inverse roots or eigenbases
  size_t moments = 0;     // moments, grafting state, eigenvalue estimates, momentum of Muon
  size_t adamw = 0;       // AdamW moments (all parameters for adamw; the others' otherwise)
  size_t compensation = 0;   // update compensation (one float per parameter when on)
  int64_t blocks = 0;     // preconditioner blocks (0: none)
  size_t total() const { return factors + roots + moments + adamw + compensation; }
};

struct OptimizerDescription {
  OptimizerKind kind;
  OptimConfig (*defaults)();                 // its paper's / reference code's values
  std::vector<std::string> keys;             // the optim.* keys it reads (docs/configuration.md)
  std::string (*check)(const OptimConfig&);  // "" when its keys are fine, else what is wrong
  // Preconditioner blocks whose roots / bases are refreshed every precondition_frequency steps:
  // the shadow pipeline, coherence of replicas and the refresh buffers apply to it.
  bool refreshes = false;
  // A refresh continues from the last version (SOAP's and KL-Shampoo's bases), which coherence's
  // staleness must let it see.
  bool refresh_continues = false;
  bool runs_on_cuda = false;                 // runtime.backend cuda
  // Rows of the units a sharded layer is cut into (fsdp/shard_layout.hpp): a unit never straddles
  // two ranks, so what the optimizer treats as one matrix lives on one rank.
  int64_t (*shard_unit_rows)(const OptimConfig&);
  std::unique_ptr<Optimizer> (*make)(const OptimConfig&, const std::vector<ParamTable>&, bool stagger, bool own_memory);
  // Per layer, the state tensors it keeps, in Optimizer::layer_states order.
  std::vector<std::vector<StateSpec>> (*state_specs)(const OptimConfig&, const std::vector<ParamTable>&);
  OptimizerStateBytes (*state_bytes)(const OptimConfig&, const std::vector<ParamTable>&);
  // The GEMM FLOPs of one step's update (0: elementwise only) and its work buffers in bytes
  // beyond the refresh buffers (the estimates; run_info.json).
  double (*step_flops)(const OptimConfig&, const std::vector<ParamTable>&);
  double (*work_bytes)(const OptimConfig&, const std::vector<ParamTable>&);
  const char* adamw_covers;                  // --dry-run: what its AdamW moments cover
};

// The description of a kind, and every kind's in optim.name's order.
const OptimizerDescription& describe(OptimizerKind kind);
const std::vector<const OptimizerDescription*>& optimizer_descriptions();

// Each optimizer's own (beside its code).
const OptimizerDescription& adamw_description();
const OptimizerDescription& shampoo_description();
const OptimizerDescription& soap_description();
const OptimizerDescription& kl_shampoo_description();
const OptimizerDescription& muon_description();

}  // namespace asteria
