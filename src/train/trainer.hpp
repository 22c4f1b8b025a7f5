#pragma once
// The training loop of one process. Construction validates everything that can be wrong
// (supported features, data files, sequence length vs data) before anything is written to
// run.dir; run() then trains train.steps steps, each executed as a plan (step_plan.hpp), writes
// run.dir/config.yaml (the resolved config), run.dir/metrics.jsonl and run.dir/run_info.json.
#include <memory>
#include <string>
#include <vector>

#include "train/config.hpp"

namespace asteria {

struct TrainResult {
  double final_loss = 0;       // training loss of the last step
  double final_eval_loss = -1; // -1 when there is no eval data
  double tokens_per_s = 0;     // mean over the steps after the first
};

class Trainer {
 public:
  explicit Trainer(const Config& cfg);
  ~Trainer();
  TrainResult run();

  // Parameters of layer l (tests compare runs bit for bit).
  const std::vector<float>& final_params(int layer) const;
  int num_layers() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The plan of one step, as text (for --print-plan); needs no data.
std::string describe_step_plan(const Config& cfg, int64_t step);

}  // namespace asteria
