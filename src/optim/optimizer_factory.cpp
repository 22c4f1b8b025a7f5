#include "optim/optimizer_factory.hpp"

namespace asteria {

SecondOrderParams second_order_params(const OptimConfig& o, bool stagger) {
  SecondOrderParams p;
  p.stagger = stagger;
  p.algorithm = o.name;
  PreconditionerParams& c = p.precond;
  c.beta1 = o.beta1;
  c.beta2 = o.beta2;
  c.eps = o.eps;
  c.shampoo_beta = o.shampoo_beta < 0 ? o.beta2 : o.shampoo_beta;
  c.root_eps = o.root_eps;
  c.precondition_frequency = o.precondition_frequency;
  c.start_preconditioning_step = o.start_preconditioning_step;
  c.root_method = o.root_method;
  c.grafting = o.grafting;
  c.max_failures = o.max_failures;
  c.kl_init_factor = o.kl_init_factor;
  c.kl_max_clamp = o.kl_max_clamp;
  c.refresh_dtype = o.refresh_dtype;
  p.weight_decay = o.weight_decay;
  p.max_preconditioner_dim = o.max_preconditioner_dim;
  p.precondition_embeddings = o.precondition_embeddings;
  const AdamW1DConfig& a = o.adamw_1d;
  p.adamw_1d = {a.beta1, a.beta2, a.eps, a.weight_decay, true, true, a.lr > 0 ? a.lr / o.lr : 1.0, false};
  p.compensated = o.compensated_updates;
  return p;
}

std::unique_ptr<Optimizer> make_optimizer(const OptimConfig& o, const std::vector<ParamTable>& layers,
                                          bool stagger, bool own_memory) {
  return describe(o.name).make(o, layers, stagger, own_memory);
}

std::vector<std::vector<StateSpec>> optimizer_state_specs(const OptimConfig& o, const std::vector<ParamTable>& layers) {
  return describe(o.name).state_specs(o, layers);
}

OptimizerStateBytes optimizer_state_bytes(const OptimConfig& o, const std::vector<ParamTable>& layers) {
  return describe(o.name).state_bytes(o, layers);
}

int64_t shard_unit_rows(const OptimConfig& o) { return describe(o.name).shard_unit_rows(o); }

}  // namespace asteria
