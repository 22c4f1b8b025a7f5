#include "train/dry_run.hpp"

#include <sstream>

#include "model/model.hpp"
#include "train/flops.hpp"
#include "train/optimizer_factory.hpp"
#include "train/tier_config.hpp"

namespace asteria {

namespace {

std::string human_bytes(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (b >= 1024 && u < 4) {
    b /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f %s", b, units[u]);
  return buf;
}

std::string human_count(double n) {
  char buf[32];
  if (n >= 1e9) std::snprintf(buf, sizeof buf, "%.3fB", n / 1e9);
  else if (n >= 1e6) std::snprintf(buf, sizeof buf, "%.3fM", n / 1e6);
  else std::snprintf(buf, sizeof buf, "%.0f", n);
  return buf;
}

}  // namespace

std::string dry_run_report(const Config& cfg) {
  check_supported(cfg);
  std::ostringstream os;
  os << "# resolved config (" << cfg.source << ")\n" << config_to_yaml(cfg) << "\n";
  const ParamCounts pc = count_params(cfg.model);
  os << "# parameters\n"
     << "total:        " << pc.total << " (" << human_count(pc.total) << ")\n"
     << "embedding:    " << pc.embedding << "\n"
     << "matrices:     " << pc.matrices << "\n"
     << "norm weights: " << pc.norms << "\n\n";
  const double p = static_cast<double>(pc.total) * sizeof(float);
  const OptimizerStateBytes ob = optimizer_state_bytes(cfg.optim, model_param_tables(cfg.model));
  const double opt = static_cast<double>(ob.total());
  const double act = static_cast<double>(model_activation_bytes(cfg.model, cfg.train.micro_batch));
  os << "# memory estimate (fp32, one process)\n"
     << "params:           " << human_bytes(p) << "\n"
     << "grads:            " << human_bytes(p) << "\n"
     << "optimizer state:  " << human_bytes(opt) << "  (" << cfg.optim.name << ")\n";
  if (cfg.optim.name != "adamw")
    os << "  factors:        " << human_bytes(static_cast<double>(ob.factors)) << "  (" << ob.blocks
       << " blocks, max dim " << cfg.optim.max_preconditioner_dim << ")\n"
       << "  roots/bases:    " << human_bytes(static_cast<double>(ob.roots)) << "\n"
       << "  moments:        " << human_bytes(static_cast<double>(ob.moments)) << "\n";
  os << "  adamw moments:  " << human_bytes(static_cast<double>(ob.adamw))
     << (cfg.optim.name == "adamw" ? "  (m, v of every parameter)\n" : "  (m, v of the 1-D / unpreconditioned parameters)\n");
  if (ob.compensation > 0)
    os << "  compensation:   " << human_bytes(static_cast<double>(ob.compensation))
       << "  (optim.compensated_updates: one float per parameter)\n";
  os
     << "activations:      " << human_bytes(act) << "  (micro-batch " << cfg.train.micro_batch
     << " x seq " << cfg.model.seq_len << ")\n"
     << "total:            " << human_bytes(2 * p + opt + act) << "\n\n";
  os << "# " << configured_tier_layout(cfg).describe() << "\n";
  const double fpt = training_flops_per_token(cfg.model);
  const double tokens_per_step =
      static_cast<double>(cfg.train.micro_batch) * cfg.train.grad_accum * cfg.model.seq_len;
  os << "# compute\n"
     << "training FLOPs per token: " << fpt << "  (" << training_flops_formula() << ")\n"
     << "tokens per step:          " << tokens_per_step << "\n"
     << "training FLOPs per step:  " << fpt * tokens_per_step << "\n";
  return os.str();
}

}  // namespace asteria
