#pragma once
// The OLMo-family decoder as a sequence of layers, each a forward/backward pair over one flat
// parameter buffer (see param_table.hpp). The plan calls the layers one at a time:
//
//   layer 0            "embed"     token embedding                      wte [E, C]
//   layer 1..N         "blocks.i"  attention + SwiGLU MLP               see block.hpp
//   layer N+1          "head"      final norm, LM head, loss            [norm_f [C]] [lm_head [E, C]]
//
// (E = embedding_size, C = d_model.) With tied embeddings the head reads wte and accumulates
// its gradient into layer 0's gradient buffer, so embed's backward must run after head's.
//
// Contract of one micro-batch:
//   set_batch(inputs, targets)                 B x T token ids each (targets = inputs shifted)
//   forward(0) .. forward(N+1)                 forward(N+1) computes the loss (mean over B*T,
//                                              plus z-loss when configured) and returns it
//   [recompute(l)]                             before backward(l) of a block whose activations
//                                              are not kept (activation_recompute.hpp)
//   backward(N+1) .. backward(0)               gradients are *added* (scaled by grad_scale) to
//                                              the gradient buffers, so micro-batches accumulate;
//                                              zero_grads() starts a step
// T is float for training and double for finite-difference checks. Ops is the backend the
// layers run on (model/ops/op_set.hpp): CpuOps (host memory) or CudaOps (float; device memory,
// in builds with ASTERIA_HAVE_CUDA): params(l), grads(l), bind_* and last_final_hidden() are then
// device pointers, set_batch and init take host values and move them over. All buffers (parameters,
// gradients, activations) are allocated once in the constructor for the given batch size.
//
// Precision (runtime.precision; T float): Fp32, or Bf16: the linear layers' GEMMs on bf16
// operands with fp32 accumulation, and what each block keeps for its backward stored as bf16
// (activation_layout.hpp says which tensors stay fp32). Every block then runs its forward in one
// shared fp32 buffer, rounds the kept tensors there to bf16 (so the backward reads the same
// values whether they were packed and widened again or recomputed: recompute on and off give the
// same bits) and packs them into bf16 buffers of its own; its backward widens them back into the
// shared buffer. Parameters, gradients, the residual stream and the head stay fp32, on both
// backends alike (the CPU rounds at the same places as the GPU). With owned parameters the model
// keeps a bf16 copy of each layer's parameters (2 bytes each), made before the layer's GEMMs
// whenever params(l) was handed out since (whoever asked may have written through it: in
// training the optimizer's step, so once per step, after the optimizer), and the GEMMs read their
// weights from it instead of rounding them each time; the same values either way. Bound layers
// (sharded: a new buffer at every gather) round their weights in each GEMM.
//
// Storage::Image: the parameters only (no gradients, no activations): the host image of a model
// that runs on another backend (init, checkpoints, export read and write it); it runs nothing.
//
// Storage::Bound (sharded training, docs/DESIGN.md "FSDP"): the model allocates no parameter or
// gradient buffers; the caller binds layer l's buffers (a gathered copy, a gradient slot) with
// bind_params / bind_grads before running it and unbinds them (nullptr) after.
// Storage::BoundParams (parameters on the disk tier, fsdp/param_offload.hpp): the model owns its
// gradients but no parameters; the caller binds each layer's parameters as Bound's are (the
// layers kept in memory once, the offloaded ones while in flight). forward(l)
// needs params(l) (the tied head also params(0)); backward(l) needs params(l) and grads(l)
// (the tied head also params(0) and grads(0); the embedding only grads(0)).
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/backend.hpp"
#include "model/activation_recompute.hpp"
#include "model/model_config.hpp"
#include "model/param_table.hpp"

namespace asteria {

struct CpuOps;
struct CudaOps;

template <class T, class Ops = CpuOps>
class Model {
 public:
  enum class Storage { Owned, Bound, Image, BoundParams };
  Model(const ModelConfig& cfg, int batch, Storage storage = Storage::Owned,
        const ActivationRecompute& recompute = {}, ComputePrecision precision = ComputePrecision::Fp32);
  ~Model();
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  const ModelConfig& config() const;
  int batch() const;
  int num_layers() const;                          // n_layers + 2
  const std::string& layer_name(int l) const;
  const ParamTable& table(int l) const;
  T* params(int l);                                // null when unbound (Bound, BoundParams); marks
                                                   // layer l's bf16 copy for remaking
  T* grads(int l);
  size_t num_params() const;                       // all layers
  // Storage::Bound: layer l's buffers from now on (table(l).numel elements each; nullptr unbinds);
  // BoundParams: its parameters only.
  void bind_params(int l, T* params);
  void bind_grads(int l, T* grads);

  // Initializes every parameter from the config's init scheme; a pure function of the seed.
  void init(uint64_t seed);
  // The same values for layer l alone, into its bound (or owned) parameter buffer.
  void init_layer(int l, uint64_t seed);
  void zero_grads();                               // the owned (or bound) gradient buffers

  void set_batch(const int32_t* inputs, const int32_t* targets);
  // Runs layer l forward. Returns the loss for the head layer, 0 otherwise.
  double forward(int l);
  // Whether layer l is a block whose activations are recomputed for its backward.
  bool recomputes(int l) const;
  // Runs block l's forward again from its kept input, so that backward(l) can run; needs
  // params(l). Nothing is computed when the shared buffer still holds l's activations (the last
  // recomputed block's, right after the forward).
  void recompute(int l);
  // Runs layer l backward, adding grad_scale * dLoss/dparams to grads(l) (and to grads(0) for
  // the tied head). A recomputed block needs recompute(l) first.
  void backward(int l, double grad_scale);

  // Loss parts of the last head forward: mean cross-entropy, and the z-loss term with its
  // coefficient applied (z_loss * mean(lse^2)), so that ce + z = the returned loss.
  double last_ce_loss() const;
  double last_z_loss() const;

  // The final norm's output xf [B*T, C] of the last head forward, row n = b*T + t. The head does
  // not keep its logits (they are overwritten by their gradient); logits = xf W^T [B*T, E] with W
  // the LM head (lm_head, or wte when tied). For checks against other implementations (export).
  const T* last_final_hidden() const;

  // Bytes of activation memory held for backward (for reports).
  size_t activation_bytes() const;
  // bf16 copies of a layer's parameters made so far (for tests), and the bytes they take.
  size_t bf16_copies_made() const;
  size_t bf16_copy_bytes() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

extern template class Model<float>;
extern template class Model<double>;
#ifdef ASTERIA_HAVE_CUDA
extern template class Model<float, CudaOps>;
#endif

// Parameter count and tables without allocating a model (for --dry-run of big presets).
std::vector<ParamTable> model_param_tables(const ModelConfig& cfg);
// Whether layer l holds GEMM weights (the blocks, the LM head's layer: the embedding when tied),
// and the bytes of the bf16 weight copies a Model with owned parameters keeps at bf16 precision.
bool layer_has_gemm_weights(const ModelConfig& cfg, int l);
size_t model_bf16_weight_copy_bytes(const ModelConfig& cfg);
// Layer names without allocating a model: "embed", "blocks.0" .. "blocks.N-1", "head".
std::vector<std::string> model_layer_names(const ModelConfig& cfg);
// Per layer (as model_layer_names), whether it recomputes its activations for its backward.
std::vector<bool> model_recomputed_layers(const ModelConfig& cfg,
                                          const ActivationRecompute& recompute);
// Activation bytes a Model<float> of this config, micro-batch, recompute and precision would
// allocate.
size_t model_activation_bytes(const ModelConfig& cfg, int batch, const ActivationRecompute& recompute = {},
                              ComputePrecision precision = ComputePrecision::Fp32);

}  // namespace asteria
