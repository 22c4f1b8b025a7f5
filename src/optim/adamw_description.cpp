// AdamW's description (optimizer_description.hpp): OLMo's recipe (Groeneveld et al. 2024).
#include "optim/adamw.hpp"
#include "optim/optimizer_description.hpp"
#include "optim/update_compensation.hpp"

namespace asteria {

namespace {

AdamWParams adamw_params(const OptimConfig& o) {
  return {o.beta1, o.beta2, o.eps, o.weight_decay, o.decay_embeddings, o.decay_norms, 1.0, o.compensated_updates};
}

}  // namespace

const OptimizerDescription& adamw_description() {
  static const OptimizerDescription d{
      OptimizerKind::AdamW,
      [] {
        OptimConfig o;
        o.name = OptimizerKind::AdamW;
        return o;
      },
      {"lr", "betas", "eps", "weight_decay", "decay_embeddings", "decay_norms", "grad_clip", "compensated_updates"},
      [](const OptimConfig& o) { return o.beta2 < 1.0 ? std::string() : std::string("optim.betas: AdamW needs beta2 < 1"); },
      /*refreshes=*/false,
      /*refresh_continues=*/false,
      /*runs_on_cuda=*/true,
      [](const OptimConfig& o) { return o.max_preconditioner_dim; },
      [](const OptimConfig& o, const std::vector<ParamTable>& layers, bool, bool own_memory) -> std::unique_ptr<Optimizer> {
        return std::make_unique<AdamW>(adamw_params(o), layers, nullptr, own_memory);
      },
      [](const OptimConfig& o, const std::vector<ParamTable>& layers) {
        std::vector<std::vector<StateSpec>> out(layers.size());
        for (int l = 0; l < static_cast<int>(layers.size()); ++l) {
          if (o.compensated_updates && layers[l].numel > 0)
            for (StateSpec& s : compensation_state_specs(l, layers[l], {})) out[l].push_back(std::move(s));
          for (StateSpec& s : adamw_state_specs(l, layers[l], nullptr)) out[l].push_back(std::move(s));
        }
        return out;
      },
      [](const OptimConfig& o, const std::vector<ParamTable>& layers) {
        OptimizerStateBytes s;
        for (const ParamTable& t : layers) {
          if (o.compensated_updates) s.compensation += t.numel * sizeof(float);
          s.adamw += 2 * t.numel * sizeof(float);
        }
        return s;
      },
      [](const OptimConfig&, const std::vector<ParamTable>&) { return 0.0; },
      [](const OptimConfig&, const std::vector<ParamTable>&) { return 0.0; },
      "m, v of every parameter"};
  return d;
}

}  // namespace asteria
