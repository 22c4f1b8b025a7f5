#pragma once
// What the host's training target does with parameters on the disk tier (runtime.tiers.params.home
// disk; fsdp/param_offload.hpp): the model (Storage::BoundParams) runs on the store's buffers,
// the layers kept in memory bound once at construction, an offloaded layer bound by its
// param_load (staging lane) and unbound by its param_release (compute lane) or its param_store
// (staging lane, after its optimizer step). The residency check installed with the handlers
// makes the executor refuse any op that touches an offloaded layer's parameters while they are
// not in memory. Between steps (every lane idle) it initializes the parameters, runs an eval
// forward and gives the parameters out, reading each offloaded layer in turn.
#include <cstdint>
#include <vector>

#include "core/step_metrics.hpp"
#include "fsdp/param_offload.hpp"
#include "model/model.hpp"
#include "model/param_source.hpp"
#include "runtime/executor.hpp"

namespace asteria {

class OffloadedLayers {
 public:
  OffloadedLayers(Model<float>& model, OffloadedParams& store);

  // The param_load, param_release and param_store handlers and the residency check.
  void bind_ops(Executor& executor);

  // Every layer's first parameters: from the seed (the model's init, a layer at a time), or the
  // rows `source` gives.
  void init(uint64_t seed);
  void init_from(const ParamSource& source);
  // forward(l) for every layer in order, each offloaded layer read for it (an eval batch).
  template <class Forward>
  void forward_all(Forward forward) {
    for (int l = 0; l < model_.num_layers(); ++l) {
      if (!store_.on_disk(l)) {
        forward(l);
        continue;
      }
      model_.bind_params(l, store_.load(l));
      forward(l);
      model_.bind_params(l, nullptr);
      store_.release(l);
    }
  }
  // Layer l's parameters, wherever they live.
  std::vector<float> params(int l);

  // The step's figures: bytes read and written, the staging lane's time in the reads and writes,
  // and the compute lane's wait for them (params_stall_s).
  void record_metrics(StepMetrics& m, const Executor& executor);

 private:
  Model<float>& model_;
  OffloadedParams& store_;
};

}  // namespace asteria
