#pragma once
// The optimizer's section of the config (optim.*), and each optimizer's preset: its paper's or
// reference implementation's values (optim_defaults), which the config's keys then override.
// Beside the optimizers, as model/model_config.hpp is beside the model: the config layer
// (config/config.hpp) holds one of each and reads and writes their fields.
#include <cstdint>
#include <string>

#include "optim/matrix_functions.hpp"

namespace asteria {

// optim.name.
enum class OptimizerKind { AdamW, Shampoo, Soap, KlShampoo, Muon };
// optim.root_method: Shampoo's inverse roots by eigendecomposition, or by coupled Newton.
enum class RootMethod { Eigh, Newton };
// optim.grafting: Shampoo's update takes the norm of Adam's (Adam), or its own (None).
enum class Grafting { Adam, None };

inline const char* to_string(OptimizerKind k) {
  switch (k) {
    case OptimizerKind::AdamW: return "adamw";
    case OptimizerKind::Shampoo: return "shampoo";
    case OptimizerKind::Soap: return "soap";
    case OptimizerKind::KlShampoo: return "kl_shampoo";
    case OptimizerKind::Muon: return "muon";
  }
  return "?";
}
inline const char* to_string(RootMethod m) { return m == RootMethod::Newton ? "newton" : "eigh"; }
inline const char* to_string(Grafting g) { return g == Grafting::None ? "none" : "adam"; }

// AdamW for the tensors a second-order optimizer does not precondition (norm weights, and
// embeddings unless optim.precondition_embeddings), and for those Muon does not orthogonalize
// (embeddings, the LM head, norm weights).
struct AdamW1DConfig {
  double lr = -1;               // negative: optim.lr (and its schedule); else this peak lr
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double weight_decay = 0.0;
};

// Defaults depend on `name`: each optimizer starts from its paper's / reference
// implementation's values (optim_defaults), then the config's keys override them.
struct OptimConfig {
  OptimizerKind name = OptimizerKind::AdamW;
  double lr = 4e-4;
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double weight_decay = 0.1;
  bool decay_embeddings = true; // AdamW: apply weight decay to wte / lm_head
  bool decay_norms = false;     // AdamW: apply weight decay to norm weights
  double grad_clip = 1.0;       // global L2 norm; <= 0 disables
  bool compensated_updates = true;  // Kahan-compensated parameter updates (optim/update_compensation.hpp)
  // Second-order optimizers.
  double shampoo_beta = -1;     // factor EMA; negative: beta2; 1: plain sums
  double root_eps = 1e-12;      // Shampoo: (L + root_eps I)^(-1/4)
  int64_t precondition_frequency = 10;
  int64_t start_preconditioning_step = 1;   // Shampoo: first step with roots
  int64_t max_preconditioner_dim = 1024;
  int max_failures = 3;         // consecutive failed refreshes of a block before stopping
  bool precondition_embeddings = true;
  RootMethod root_method = RootMethod::Eigh;   // Shampoo
  Grafting grafting = Grafting::Adam;           // Shampoo
  matfn::Precision refresh_dtype = matfn::Precision::Float64;  // roots / eigenbases (SOAP, KL: float32)
  double kl_init_factor = 0.1;        // KL-Shampoo: initial eigenvalue estimate
  double kl_max_clamp = 4000;         // KL-Shampoo: cap of inverse-sqrt eigenvalue estimates
  int ns_steps = 5;                   // Muon: Newton-Schulz iterations
  bool nesterov = true;               // Muon: the Nesterov form of the momentum
  AdamW1DConfig adamw_1d;
};

// The defaults of an optimizer: its description's (optim/optimizer_description.hpp).
OptimConfig optim_defaults(OptimizerKind kind);

}  // namespace asteria
