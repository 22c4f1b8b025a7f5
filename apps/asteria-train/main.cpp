// asteria-train: trains an OLMo-style model from a YAML config.
//   asteria-train --config FILE.yaml [--set key=value ...] [--resume latest|DIR] [--dry-run] [--print-plan]
//   asteria-train --print-config-reference   (docs/configuration.md)
// Exit codes: 0 success (also train.stop_after), 1 bad input (config, data, checkpoint, command
// line), 2 internal error, 75 stopped by SIGTERM / SIGINT / SIGUSR1 after writing a checkpoint
// (resume with --resume latest), 76 a rank, host or link was lost (a collective that timed out
// or failed; resume from the newest checkpoint once the ranks are back), 130 a second SIGINT (no
// checkpoint).
#include <CLI/CLI.hpp>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <iostream>

#include "core/cpu/blas_kernels.hpp"
#include "core/error.hpp"
#include "core/signal_thread.hpp"
#include "comm/mpi_communicator.hpp"
#include "comm/topology.hpp"
#include "config/config.hpp"
#include "config/config_reference.hpp"
#include "train/estimates/dry_run.hpp"
#include "train/plan_description.hpp"
#include "train/trainer.hpp"

int main(int argc, char** argv) {
  // Before any thread exists: stop signals must never run their handler inside oneDNN's
  // GEMM kernels (core/signal_thread.hpp).
  asteria::route_async_signals_to_signal_thread();
  CLI::App app{"asteria-train: train an OLMo-style language model"};
  std::string config_path;
  std::vector<std::string> overrides;
  std::string resume;
  bool dry_run = false, print_plan = false;
  int64_t plan_step = 1;
  app.add_option("--config,-c", config_path, "YAML config file (see configs/)")->required();
  app.add_option("--set,-s", overrides, "override a config key: dotted.key=value (repeatable)")
      ->take_all();
  app.add_option("--resume", resume,
                 "resume from a checkpoint: 'latest' (the newest under run.dir/checkpoints; fresh when none) "
                 "or a checkpoint directory (same as --set checkpoint.resume=...)");
  app.add_flag("--dry-run", dry_run,
               "validate the config, print it resolved with parameter count, memory estimate and "
               "FLOPs per token (with --set distributed.world_size=W: also the shard map, per-rank memory and "
               "comm bytes of W ranks), and exit");
  app.add_flag_callback("--print-config-reference",
                        [] {
                          // Built whole first: a schema key without a meaning prints nothing but the
                          // error (exit 2: the program's own fault).
                          std::string text;
                          try {
                            text = asteria::config_reference_markdown();
                          } catch (const asteria::Error& e) {
                            std::fprintf(stderr, "asteria-train: %s\n", e.what());
                            std::exit(2);
                          }
                          std::cout << text;
                          throw CLI::Success();
                        },
                        "print every config key (type, default, allowed values, meaning) as markdown: docs/configuration.md");
  app.add_flag("--print-plan", print_plan, "print the layer-execution plan of a step and exit");
  app.add_option("--plan-step", plan_step, "the step whose plan --print-plan prints")->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);

  // Launched by mpirun / srun with several ranks: MPI for the whole run (the session outlives
  // the communicators). A rank that fails ends every rank (MPI_Abort) instead of leaving them
  // waiting in a collective.
  std::unique_ptr<asteria::MpiSession> mpi;
  std::unique_ptr<asteria::Communicator> world;
  auto fail_with = [&](int code) {
    if (world && world->size() > 1) asteria::abort_all_ranks(code);
    return code;
  };
  try {
    if (!resume.empty()) overrides.push_back("checkpoint.resume=" + resume);
    asteria::Config cfg = asteria::load_config(config_path, overrides);
    // The right BLAS kernels for this CPU, before MPI and any BLAS call (runtime.blas; may
    // re-execute this process: core/cpu/blas_kernels.hpp).
    if (const std::string line = asteria::ensure_blas_kernels(argv, cfg.runtime.blas == asteria::BlasKernels::Auto); !line.empty())
      std::fprintf(stderr, "%s\n", line.c_str());
    for (const std::string& note : cfg.notes) std::fprintf(stderr, "asteria-train: note: %s\n", note.c_str());
    if (!cfg.backend_choice.empty()) std::fprintf(stderr, "asteria-train: %s\n", cfg.backend_choice.c_str());
    if (dry_run) {
      std::cout << asteria::dry_run_report(cfg);
      return 0;
    }
    if (print_plan) {
      std::cout << asteria::describe_step_plan(cfg, plan_step);
      return 0;
    }
    if (asteria::launched_with_several_ranks()) {
      // A peer that dies mid-transfer must not kill this rank through SIGPIPE (exit 141, no
      // message): the write fails instead, the transfer's request reports it and the rank ends
      // naming it (a CommError, exit 76).
      std::signal(SIGPIPE, SIG_IGN);
      mpi = std::make_unique<asteria::MpiSession>(&argc, &argv);
      world = asteria::make_mpi_world_communicator();
    }
    asteria::Trainer trainer(cfg, world.get());
    asteria::TrainResult r = trainer.run();
    if (world && world->rank() != 0) return r.signal ? asteria::kExitCheckpointedOnSignal : 0;
    if (r.signal) {
      std::printf("stopped by signal %d after step %lld; checkpoint %s (continue with --resume latest)\n", r.signal,
                  static_cast<long long>(r.last_step), r.checkpoint.c_str());
      return asteria::kExitCheckpointedOnSignal;
    }
    std::printf("done: %lld steps, final loss %.4f", static_cast<long long>(r.last_step), r.final_loss);
    if (r.final_eval_loss >= 0) std::printf(", final eval loss %.4f", r.final_eval_loss);
    std::printf(", %.0f tokens/s; outputs in %s\n", r.tokens_per_s, cfg.run.dir.c_str());
    return 0;
  } catch (const asteria::CommError& e) {
    std::fprintf(stderr, "asteria-train: error: %s\n", e.what());
    return fail_with(asteria::kExitCommLost);
  } catch (const asteria::Error& e) {
    std::fprintf(stderr, "asteria-train: error: %s\n", e.what());
    return fail_with(1);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "asteria-train: internal error: %s\n", e.what());
    return fail_with(2);
  }
}
