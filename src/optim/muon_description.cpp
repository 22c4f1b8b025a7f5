// Muon's description (optimizer_description.hpp): Keller Jordan's Muon with the reference's
// auxiliary AdamW (KellerJordan/Muon, muon.py: MuonWithAuxAdam's defaults).
#include <limits>

#include "optim/muon.hpp"
#include "optim/optimizer_description.hpp"
#include "optim/update_compensation.hpp"

namespace asteria {

namespace {

MuonParams muon_params(const OptimConfig& o) {
  MuonParams p;
  p.momentum = o.beta1;
  p.nesterov = o.nesterov;
  p.ns_steps = o.ns_steps;
  p.weight_decay = o.weight_decay;
  const AdamW1DConfig& a = o.adamw_1d;
  p.adamw = {a.beta1, a.beta2, a.eps, a.weight_decay, true, true, a.lr > 0 ? a.lr / o.lr : 1.0, false};
  p.compensated = o.compensated_updates;
  return p;
}

bool not_orthogonalized(const ParamEntry& e) { return !muon_orthogonalizes(e); }

}  // namespace

const OptimizerDescription& muon_description() {
  static const OptimizerDescription d{
      OptimizerKind::Muon,
      [] {
        OptimConfig o;
        o.name = OptimizerKind::Muon;
        // The Muon group's defaults (lr 0.02, momentum 0.95, Nesterov, 5 Newton-Schulz steps,
        // weight decay 0) and the auxiliary Adam group's (lr 3e-4, betas (0.9, 0.95), eps 1e-10,
        // weight decay 0).
        o.lr = 0.02;
        o.beta1 = 0.95;
        o.weight_decay = 0.0;
        o.nesterov = true;
        o.ns_steps = 5;
        o.adamw_1d = AdamW1DConfig{3e-4, 0.9, 0.95, 1e-10, 0.0};
        return o;
      },
      {"lr", "betas (its first: the momentum)", "weight_decay", "grad_clip", "compensated_updates", "ns_steps",
       "nesterov", "adamw_1d.*"},
      [](const OptimConfig& o) {
        return o.beta1 < 1.0 ? std::string() : std::string("optim.betas: Muon's momentum (the first) must be < 1");
      },
      /*refreshes=*/false,
      /*refresh_continues=*/false,
      /*runs_on_cuda=*/false,
      // Whole tensors: every matrix on one rank, so Newton-Schulz needs no gather.
      [](const OptimConfig&) { return int64_t{1} << 40; },
      [](const OptimConfig& o, const std::vector<ParamTable>& layers, bool, bool own_memory) -> std::unique_ptr<Optimizer> {
        return std::make_unique<Muon>(muon_params(o), layers, own_memory);
      },
      [](const OptimConfig& o, const std::vector<ParamTable>& layers) {
        std::vector<std::vector<StateSpec>> out(layers.size());
        for (int l = 0; l < static_cast<int>(layers.size()); ++l) {
          if (o.compensated_updates && layers[l].numel > 0)
            for (StateSpec& s : compensation_state_specs(l, layers[l], {})) out[l].push_back(std::move(s));
          for (StateSpec& s : adamw_state_specs(l, layers[l], not_orthogonalized)) out[l].push_back(std::move(s));
          for (StateSpec& s : muon_state_specs(l, layers[l])) out[l].push_back(std::move(s));
        }
        return out;
      },
      [](const OptimConfig& o, const std::vector<ParamTable>& layers) {
        OptimizerStateBytes s;
        for (const ParamTable& t : layers) {
          if (o.compensated_updates) s.compensation += t.numel * sizeof(float);
          for (const ParamEntry& e : t.entries)
            (muon_orthogonalizes(e) ? s.moments : s.adamw) += (muon_orthogonalizes(e) ? 1 : 2) * e.numel * sizeof(float);
        }
        return s;
      },
      [](const OptimConfig& o, const std::vector<ParamTable>& layers) { return muon_step_flops(layers, o.ns_steps); },
      [](const OptimConfig&, const std::vector<ParamTable>& layers) {
        return static_cast<double>(muon_work_floats(layers) * sizeof(float));
      },
      "m, v of the embedding, the LM head and the norm weights"};
  return d;
}

}  // namespace asteria
