#include "train/offloaded_layers.hpp"

#include "core/error.hpp"

namespace asteria {

OffloadedLayers::OffloadedLayers(Model<float>& model, OffloadedParams& store) : model_(model), store_(store) {
  ASTERIA_ASSERT(store_.num_layers() == model_.num_layers());
  for (int l = 0; l < model_.num_layers(); ++l)
    if (!store_.on_disk(l)) model_.bind_params(l, store_.resident(l));
}

void OffloadedLayers::bind_ops(Executor& executor) {
  executor.bind(OpKind::ParamLoad, [this](const Op& op) { model_.bind_params(op.layer, store_.load(op.layer)); });
  executor.bind(OpKind::ParamRelease, [this](const Op& op) {
    model_.bind_params(op.layer, nullptr);
    store_.release(op.layer);
  });
  executor.bind(OpKind::ParamStore, [this](const Op& op) {
    model_.bind_params(op.layer, nullptr);
    store_.store(op.layer);
  });
  // Every op that touches an offloaded layer's parameters finds them in memory (its read is the
  // one op that brings them there).
  executor.add_residency_check([this](const Op& op, const StateRef& ref) {
    if (ref.kind != StateKind::Params || ref.layer < 0 || op.kind == OpKind::ParamLoad) return true;
    return !store_.on_disk(ref.layer) || store_.held(ref.layer) != nullptr;
  });
}

void OffloadedLayers::init(uint64_t seed) {
  for (int l = 0; l < model_.num_layers(); ++l) {
    if (!store_.on_disk(l)) {
      model_.init_layer(l, seed);
      continue;
    }
    // A slot never written reads as zeros without touching the file; the init overwrites them.
    model_.bind_params(l, store_.load(l));
    model_.init_layer(l, seed);
    model_.bind_params(l, nullptr);
    store_.store(l);
  }
}

void OffloadedLayers::init_from(const ParamSource& source) {
  for (int l = 0; l < model_.num_layers(); ++l) {
    if (!store_.on_disk(l)) {
      source.fill(l, 0, store_.floats(l), store_.resident(l));
      continue;
    }
    source.fill(l, 0, store_.floats(l), store_.load(l));
    store_.store(l);
  }
}

std::vector<float> OffloadedLayers::params(int l) {
  std::vector<float> p(store_.floats(l));
  store_.copy_out(l, p.data());
  return p;
}

void OffloadedLayers::record_metrics(StepMetrics& m, const Executor& executor) {
  const OffloadedParams::Traffic t = store_.take_traffic();
  m.local("params_disk_bytes", {{"read", t.read}, {"written", t.written}});
  m.local("params_io_s", executor.seconds(OpKind::ParamLoad) + executor.seconds(OpKind::ParamStore));
  // One process, not sharded (tier_config.hpp refuses the rest): a forward, recompute, backward
  // or optim_step waits for nothing else on another lane than its layer's read.
  m.local("params_stall_s", executor.wait_seconds(OpKind::Forward) + executor.wait_seconds(OpKind::Recompute) +
                                executor.wait_seconds(OpKind::Backward) + executor.wait_seconds(OpKind::OptimStep));
}

}  // namespace asteria
