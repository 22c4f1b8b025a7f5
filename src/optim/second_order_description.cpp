// The descriptions of the optimizers over preconditioner blocks (optimizer_description.hpp):
// Shampoo, SOAP, KL-Shampoo, each with its paper's or reference implementation's defaults.
#include "optim/blocks.hpp"
#include "optim/optimizer_description.hpp"
#include "optim/optimizer_factory.hpp"
#include "optim/second_order.hpp"
#include "optim/update_compensation.hpp"

namespace asteria {

namespace {

// What the three share: the blocks, their state and work, the AdamW of the rest.
OptimizerDescription second_order(OptimizerKind kind, OptimConfig (*defaults)(), std::vector<std::string> own_keys,
                                  bool refresh_continues) {
  std::vector<std::string> keys = {"lr", "betas", "eps", "weight_decay", "grad_clip", "compensated_updates",
                                   "shampoo_beta", "precondition_frequency", "max_preconditioner_dim", "max_failures",
                                   "precondition_embeddings", "refresh_dtype", "adamw_1d.*"};
  keys.insert(keys.end(), own_keys.begin(), own_keys.end());
  return OptimizerDescription{
      kind,
      defaults,
      std::move(keys),
      [](const OptimConfig&) { return std::string(); },
      /*refreshes=*/true,
      refresh_continues,
      /*runs_on_cuda=*/true,
      [](const OptimConfig& o) { return o.max_preconditioner_dim; },
      [](const OptimConfig& o, const std::vector<ParamTable>& layers, bool stagger, bool own_memory) -> std::unique_ptr<Optimizer> {
        return std::make_unique<SecondOrderOptimizer>(second_order_params(o, stagger), layers, own_memory);
      },
      [](const OptimConfig& o, const std::vector<ParamTable>& layers) {
        std::vector<std::vector<StateSpec>> out(layers.size());
        const bool embeddings = o.precondition_embeddings;
        const AdamW::EntryFilter owns = [embeddings](const ParamEntry& e) { return !is_preconditioned(e, embeddings); };
        for (int l = 0; l < static_cast<int>(layers.size()); ++l) {
          const std::vector<MatrixBlock> blocks = layer_blocks(l, layers[l], o.max_preconditioner_dim, embeddings);
          if (o.compensated_updates && layers[l].numel > 0)
            for (StateSpec& s : compensation_state_specs(l, layers[l], blocks)) out[l].push_back(std::move(s));
          for (StateSpec& s : adamw_state_specs(l, layers[l], owns)) out[l].push_back(std::move(s));
          for (const MatrixBlock& b : blocks)
            for (StateSpec& s : preconditioner_state_specs(o.name, b.name, b.rows, b.cols)) out[l].push_back(std::move(s));
        }
        return out;
      },
      [](const OptimConfig& o, const std::vector<ParamTable>& layers) {
        OptimizerStateBytes s;
        for (int l = 0; l < static_cast<int>(layers.size()); ++l) {
          if (o.compensated_updates) s.compensation += layers[l].numel * sizeof(float);
          for (const ParamEntry& e : layers[l].entries)
            if (!is_preconditioned(e, o.precondition_embeddings)) s.adamw += 2 * e.numel * sizeof(float);
          for (const MatrixBlock& b : layer_blocks(l, layers[l], o.max_preconditioner_dim, o.precondition_embeddings)) {
            const PreconditionerBytes pb = preconditioner_bytes(o.name, b.rows, b.cols);
            s.factors += pb.factors;
            s.roots += pb.roots;
            s.moments += pb.moments;
            ++s.blocks;
          }
        }
        return s;
      },
      [](const OptimConfig& o, const std::vector<ParamTable>& layers) {
        double flops = 0;
        for (int l = 0; l < static_cast<int>(layers.size()); ++l)
          for (const MatrixBlock& b : layer_blocks(l, layers[l], o.max_preconditioner_dim, o.precondition_embeddings))
            flops += step_matmul_flops(o.name, b.rows, b.cols);
        return flops;
      },
      [](const OptimConfig&, const std::vector<ParamTable>&) { return 0.0; },   // the refresh buffers are the estimates'
      "m, v of the 1-D / unpreconditioned parameters"};
}

// The second-order optimizers' shared defaults.
OptimConfig base(OptimizerKind kind) {
  OptimConfig o;
  o.name = kind;
  o.decay_embeddings = true;
  o.decay_norms = false;
  o.adamw_1d = AdamW1DConfig{};
  return o;
}

}  // namespace

const OptimizerDescription& shampoo_description() {
  static const OptimizerDescription d = second_order(
      OptimizerKind::Shampoo,
      [] {
        // Meta's Distributed Shampoo (Shi et al. 2023) defaults, with Adam grafting at its
        // AdamPreconditionerConfig defaults (beta2 0.999, epsilon 1e-10); docs/optimizers.md: deviations.
        OptimConfig o = base(OptimizerKind::Shampoo);
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
        return o;
      },
      {"root_eps", "start_preconditioning_step", "root_method", "grafting"}, /*refresh_continues=*/false);
  return d;
}

const OptimizerDescription& soap_description() {
  static const OptimizerDescription d = second_order(
      OptimizerKind::Soap,
      [] {
        // Vyas et al. 2024, the authors' implementation.
        OptimConfig o = base(OptimizerKind::Soap);
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
        return o;
      },
      {}, /*refresh_continues=*/true);
  return d;
}

const OptimizerDescription& kl_shampoo_description() {
  static const OptimizerDescription d = second_order(
      OptimizerKind::KlShampoo,
      [] {
        // Lin et al. 2025, the authors' prototype.
        OptimConfig o = base(OptimizerKind::KlShampoo);
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
        o.refresh_dtype = matfn::Precision::Float32;   // as SOAP: the same QR refresh of the bases
        return o;
      },
      {"kl_init_factor", "kl_max_clamp"}, /*refresh_continues=*/true);
  return d;
}

}  // namespace asteria
