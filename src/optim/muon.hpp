#pragma once
// Muon (Keller Jordan's: MomentUm Orthogonalized by Newton-Schulz): each hidden weight matrix
// takes SGD momentum whose step is replaced by its orthogonalization; everything else (the
// embedding, the LM head, norm weights) takes AdamW, as the reference's MuonWithAuxAdam does. Per
// matrix W [R, C] with gradient G (times the clip scale):
//   M = M + (1 - mu) (G - M)                        (torch's lerp: the momentum's EMA)
//   U = M - (1 - mu) (M - G)  with nesterov, else M  (G.lerp(M, mu))
//   O = newton_schulz5(U) * sqrt(max(1, R / C))
//   W <- W - lr * (O + wd * W)                       (decoupled decay, as a decrement)
// A fused tensor (ParamEntry::parts: att_qkv's q, k, v; mlp_up's up and gate) is that many
// matrices, each orthogonalized alone, as the reference treats separate projections. The
// Newton-Schulz work runs one matrix at a time on the calling thread (OpenBLAS threads it); its
// buffers are allocated once, for the largest matrix.
//
// State per layer: the update compensation (when on), the AdamW part's moments, then "layer L /
// muon momentum", one fp32 per orthogonalized parameter (hot). A sharded rank must hold every
// matrix whole (shard units of whole tensors: OptimizerDescription::shard_unit_rows), so the
// orthogonalization needs no gather; the constructor refuses a row-block.
#include <memory>
#include <vector>

#include "core/buffer.hpp"
#include "optim/adamw.hpp"
#include "optim/update_compensation.hpp"

namespace asteria {

struct MuonParams {
  double momentum = 0.95;
  bool nesterov = true;
  int ns_steps = 5;
  double weight_decay = 0.0;
  AdamWParams adamw;                 // the other tensors'; its `compensated` is ignored
  bool compensated = true;           // Kahan-compensated updates of every parameter
};

// Whether Muon orthogonalizes this tensor (a hidden weight matrix), else its AdamW steps it.
bool muon_orthogonalizes(const ParamEntry& e);

class Muon final : public Optimizer {
 public:
  Muon(const MuonParams& p, const std::vector<ParamTable>& layers, bool own_memory = true);
  void step_layer(int layer, float* params, const float* grads, float grad_scale, double lr, int64_t step) override;
  size_t state_bytes() const override;
  std::vector<StateTensor*> layer_states(int layer) override;
  std::vector<std::vector<StatePiece>> state_pieces(int layer) const override;

 private:
  struct Matrix {
    size_t param_offset;   // in the layer's flat buffer
    size_t state_offset;   // in the layer's momentum
    int rows, cols;
  };
  struct Entry {
    std::string name;
    std::vector<int64_t> shape;
    size_t state_offset;
  };
  MuonParams p_;
  std::vector<std::vector<Matrix>> matrices_;   // per layer, each fused part alone
  std::vector<std::vector<Entry>> entries_;     // per layer, the orthogonalized tensors (checkpoint pieces)
  std::vector<StateTensor> momentum_;           // per layer; never resized after construction
  std::vector<OwnedStateMemory> own_memory_;
  UpdateCompensation comp_;
  std::unique_ptr<AdamW> adamw_;
  Buffer<float> work_;                          // the direction, then Newton-Schulz's buffers
};

// Layer l's momentum state (none when it has no matrix Muon orthogonalizes).
std::vector<StateSpec> muon_state_specs(int layer, const ParamTable& table);
// FLOPs of one step's orthogonalizations (run_info.json, the estimates).
double muon_step_flops(const std::vector<ParamTable>& layers, int ns_steps);
// Floats of the work buffers for these layers.
size_t muon_work_floats(const std::vector<ParamTable>& layers);

}  // namespace asteria
