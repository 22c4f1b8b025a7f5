#pragma once
// Activation recompute (train.activation_recompute; "checkpoint" means a saved run only): which
// blocks keep their activations from their forward to their backward. A block that does not
// keeps only its input (the residual stream x_{l-1}, which the model keeps anyway) and runs its
// forward again just before its backward (Model::recompute, a `recompute` op in the plan), into
// one activation buffer that all such blocks share. The recompute repeats the forward's
// operations on the same inputs and buffers, so the gradients are bit-identical to a run without
// recompute.
#include <string>

namespace asteria {

struct ActivationRecompute {
  enum class Mode { None, Blocks, EveryK };
  Mode mode = Mode::None;
  int every_k = 1;  // EveryK (train.recompute_every_k): block i (0-based) is recomputed when i % every_k == 0

  // Whether block i (0 .. n_layers - 1) is recomputed.
  bool recomputes(int block) const {
    switch (mode) {
      case Mode::None: return false;
      case Mode::Blocks: return true;
      case Mode::EveryK: return block % every_k == 0;
    }
    return false;
  }
  int recomputed_blocks(int n_layers) const {
    int n = 0;
    for (int i = 0; i < n_layers; i++) n += recomputes(i);
    return n;
  }
};

// train.activation_recompute's spelling: none, blocks, every_k.
inline const char* to_string(ActivationRecompute::Mode m) {
  switch (m) {
    case ActivationRecompute::Mode::None: return "none";
    case ActivationRecompute::Mode::Blocks: return "blocks";
    case ActivationRecompute::Mode::EveryK: return "every_k";
  }
  return "?";
}

}  // namespace asteria
