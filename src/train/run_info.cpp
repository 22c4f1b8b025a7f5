#include "train/run_info.hpp"

#include <filesystem>

#include <nlohmann/json.hpp>

#include "core/cpu/blas_kernels.hpp"
#include "core/cpu/gemm_routing.hpp"
#include "optim/optimizer_description.hpp"
#include "train/checkpoint/checkpoint_store.hpp"
#include "train/estimates/flops.hpp"
#include "train/run_dir.hpp"
#include "train/run_settings.hpp"
#include "train/training_run.hpp"

namespace fs = std::filesystem;

namespace asteria {

RunRates start_run_dir(const TrainingRun& run) {
  const Config& cfg = run.cfg;
  const int threads = compute_threads(cfg);
  const PeakFlops peak = cfg.run.peak_flops > 0 ? PeakFlops{cfg.run.peak_flops, "run.peak_flops"} : run.target->peak_flops(threads);
  RunRates r;
  r.peak_flops = peak.flops;
  r.flops_per_token = training_flops_per_token(cfg.model);
  r.tokens_per_step = static_cast<int64_t>(cfg.train.micro_batch) * cfg.train.grad_accum * cfg.model.seq_len * run.world;
  if (!run.writer()) return r;
  const fs::path dir = cfg.run.dir;
  fs::create_directories(dir);
  prepare_run_dir(dir, cfg, run.resume_dir, run.resumed.step);
  write_text_durably(dir / "config.yaml", config_to_yaml(cfg));
  nlohmann::json info = {{"params", run.model->num_params()},
                         {"flops_per_token", r.flops_per_token},
                         {"flop_formula", training_flops_formula()},
                         {"peak_flops", r.peak_flops},
                         {"peak_formula", peak.formula},
                         {"backend", run.target->name()},
                         {"precision", to_string(cfg.runtime.precision)},
                         {"threads", threads},
                         {"blas", blas_report()},
                         {"gemm", gemm_report()},
                         {"energy", run.target->energy_source()},
                         {"tokens_per_step", r.tokens_per_step},
                         {"ranks", run.world}};
  // This rank's share of the optimizer's GEMMs (a sharded rank's tensors; with replicas, all).
  if (const double flops = describe(cfg.optim.name).step_flops(cfg.optim, run.sharding->owned_tables()); flops > 0)
    info["optimizer_step_matmul_flops"] = flops;
  if (run.shadow) info["shadow_lane"] = to_string(shadow_lane(cfg));
  info["placement"] = placement_json(run.placement->placement());
  write_text_durably(dir / "run_info.json", info.dump(2) + "\n");
  return r;
}

}  // namespace asteria
