#pragma once
// The steps of an assembled run (train/training_run.hpp): each step built as a plan
// (step_plan.hpp) and executed, its metrics recorded by every subsystem and reduced over the
// ranks once, written to run.dir/metrics.jsonl with a progress line, evaluated every
// train.eval_every steps, checkpointed every checkpoint.every steps, at the last and when a
// signal asks (then the loop stops after the step), and re-placed between steps under memory
// pressure. The op handlers bound here are the step's work on the run's TrainingTarget.
#include <cstdint>
#include <vector>

#include "core/step_metrics.hpp"
#include "runtime/plan.hpp"
#include "train/run_info.hpp"
#include "train/trainer.hpp"

namespace asteria {

struct TrainingRun;
class StopSignals;

class StepLoop {
 public:
  // Binds the step's op handlers to run's executor; `run` outlives this.
  explicit StepLoop(TrainingRun& run);

  // Trains from the step after the resumed one to train.steps (or train.stop_after, or a stop
  // signal); run.dir is made ready first (run_info.hpp).
  TrainResult run();

  // Sharded: layer l's whole parameters after run() (gathered at its end); empty when not
  // sharded (the model holds them whole).
  const std::vector<std::vector<float>>& gathered_params() const { return final_params_; }

 private:
  void bind_step_handlers();
  // One step: the plan built and run, the metrics reduced; the step's mean loss.
  double run_step(StepMetrics& metrics, const StopSignals& signals);
  void clip_grads();
  void check_replicas_identical(const std::string& when);
  void record_and_reduce(StepMetrics& m, const StopSignals& signals);
  void record_step(StepMetrics& m, double loss, double step_s, const RunRates& rates, double elapsed_s);
  double evaluate();
  void checkpoint_if_due(int64_t last, int sig, double elapsed_s, int64_t tokens_per_step, TrainResult& result);
  void finish_run(int64_t last, int64_t tokens_per_step, TrainResult& result);
  void gather_final_params();

  TrainingRun& r_;
  Plan plan_;
  std::vector<int32_t> inputs_, targets_;
  std::vector<double> grad_sq_;   // per layer, filled by GradNorm ops
  std::vector<std::vector<float>> final_params_;

  // State of the step being executed (read by the op handlers).
  int64_t step_ = 0;
  double lr_ = 0;
  float clip_scale_ = 1;
  double grad_norm_ = 0;
  double loss_sum_ = 0;
  double step_s_ = 0;
  double replica_check_s_ = 0;   // this step's check of the replicas (distributed.check_every), if any
};

}  // namespace asteria
