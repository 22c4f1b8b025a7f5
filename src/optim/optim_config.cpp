#include "optim/optim_config.hpp"

namespace asteria {

OptimConfig optim_defaults(OptimizerKind kind) {
  OptimConfig o;
  o.name = kind;
  if (kind == OptimizerKind::AdamW) return o;  // OLMo's AdamW recipe (Groeneveld et al. 2024)
  o.decay_embeddings = true;
  o.decay_norms = false;
  o.adamw_1d = AdamW1DConfig{};
  if (kind == OptimizerKind::Shampoo) {
    // Meta's Distributed Shampoo (Shi et al. 2023) defaults, with Adam grafting at its
    // AdamPreconditionerConfig defaults (beta2 0.999, epsilon 1e-10); docs/optimizers.md: deviations.
    o.lr = 1e-2;
    o.beta1 = 0.9;
    o.beta2 = 0.999;
    o.shampoo_beta = 1.0;
    o.eps = 1e-10;
    o.root_eps = 1e-12;
    o.weight_decay = 0.0;
    o.precondition_frequency = 1;
    o.start_preconditioning_step = 1;
    o.max_preconditioner_dim = 1024;
  } else if (kind == OptimizerKind::Soap) {
    // Vyas et al. 2024, the authors' implementation.
    o.lr = 3e-3;
    o.beta1 = 0.95;
    o.beta2 = 0.95;
    o.shampoo_beta = -1;
    o.eps = 1e-8;
    o.weight_decay = 0.01;
    o.precondition_frequency = 10;
    o.max_preconditioner_dim = 10000;
    // The authors compute the eigenbases in float32; so does Asteria by default: 1.7-1.9x faster
    // refreshes at the same loss (docs/optimizers.md, bench/results/refresh-dtype-loss).
    o.refresh_dtype = matfn::Precision::Float32;
  } else {  // KlShampoo
    // Lin et al. 2025, the authors' prototype.
    o.lr = 1e-4;
    o.beta1 = 0.9;
    o.beta2 = 0.98;
    o.shampoo_beta = -1;
    o.eps = 1e-8;
    o.weight_decay = 0.01;
    o.precondition_frequency = 10;
    o.max_preconditioner_dim = 10000;
    o.kl_init_factor = 0.1;
    o.kl_max_clamp = 4000;
    o.refresh_dtype = matfn::Precision::Float32;  // as SOAP: the same QR refresh of the bases
  }
  return o;
}

}  // namespace asteria
