#include "optim/optimizer_factory.hpp"

#include "optim/adamw.hpp"
#include "optim/blocks.hpp"
#include "optim/update_compensation.hpp"

namespace asteria {

namespace {

AdamWParams adamw_params(const OptimConfig& o) {
  return {o.beta1, o.beta2, o.eps, o.weight_decay, o.decay_embeddings, o.decay_norms, 1.0, o.compensated_updates};
}

}  // namespace

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
  if (o.name == OptimizerKind::AdamW) return std::make_unique<AdamW>(adamw_params(o), layers, nullptr, own_memory);
  return std::make_unique<SecondOrderOptimizer>(second_order_params(o, stagger), layers, own_memory);
}

std::vector<std::vector<StateSpec>> optimizer_state_specs(const OptimConfig& o, const std::vector<ParamTable>& layers) {
  std::vector<std::vector<StateSpec>> out(layers.size());
  const bool embeddings = o.precondition_embeddings;
  AdamW::EntryFilter owns;
  if (o.name != OptimizerKind::AdamW) owns = [embeddings](const ParamEntry& e) { return !is_preconditioned(e, embeddings); };
  for (int l = 0; l < static_cast<int>(layers.size()); ++l) {
    std::vector<MatrixBlock> blocks;
    if (o.name != OptimizerKind::AdamW) blocks = layer_blocks(l, layers[l], o.max_preconditioner_dim, embeddings);
    if (o.compensated_updates && layers[l].numel > 0)
      for (StateSpec& s : compensation_state_specs(l, layers[l], blocks)) out[l].push_back(std::move(s));
    for (StateSpec& s : adamw_state_specs(l, layers[l], owns)) out[l].push_back(std::move(s));
    for (const MatrixBlock& b : blocks)
      for (StateSpec& s : preconditioner_state_specs(o.name, b.name, b.rows, b.cols)) out[l].push_back(std::move(s));
  }
  return out;
}

OptimizerStateBytes optimizer_state_bytes(const OptimConfig& o, const std::vector<ParamTable>& layers) {
  OptimizerStateBytes s;
  for (int l = 0; l < static_cast<int>(layers.size()); ++l) {
    if (o.compensated_updates) s.compensation += layers[l].numel * sizeof(float);
    for (const ParamEntry& e : layers[l].entries)
      if (o.name == OptimizerKind::AdamW || !is_preconditioned(e, o.precondition_embeddings))
        s.adamw += 2 * e.numel * sizeof(float);
    if (o.name == OptimizerKind::AdamW) continue;
    for (const MatrixBlock& b : layer_blocks(l, layers[l], o.max_preconditioner_dim, o.precondition_embeddings)) {
      PreconditionerBytes pb = preconditioner_bytes(o.name, b.rows, b.cols);
      s.factors += pb.factors;
      s.roots += pb.roots;
      s.moments += pb.moments;
      ++s.blocks;
    }
  }
  return s;
}

}  // namespace asteria
