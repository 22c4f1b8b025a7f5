#pragma once
// One transformer block (OLMo family): causal attention with RoPE and optional QK-norm, then a
// SwiGLU MLP, with the norm placed per the config:
//   pre  (OLMo-1): x1 = x + att(norm(x));   out = x1 + mlp(norm(x1))
//   post (OLMo-2): x1 = x + norm(att(x));   out = x1 + norm(mlp(x1))
// where att(h) = att_out(attention(rope(qknorm(att_qkv(h))))) and
//       mlp(h) = mlp_down(swiglu(mlp_up(h))).
#include "model/activation_layout.hpp"
#include "model/model_config.hpp"
#include "model/ops/gemm_precision.hpp"
#include "model/param_table.hpp"

namespace asteria {

struct CpuOps;   // model/ops/op_set.hpp: the backend the layers run on

// Views of one block's tensors inside its flat buffer (parameters or gradients).
// Null where the config has no such tensor (norm weights of LayerNorm, QK-norm when off).
template <class T>
struct BlockTensors {
  T* att_norm = nullptr;   // [C]
  T* att_qkv = nullptr;    // [3C, C]
  T* q_norm = nullptr;     // [C]
  T* k_norm = nullptr;     // [C]
  T* att_out = nullptr;    // [C, C]
  T* mlp_norm = nullptr;   // [C]
  T* mlp_up = nullptr;     // [2F, C]
  T* mlp_down = nullptr;   // [C, F]
};

// Resolves the views from a block table (names "blocks.{i}.<tensor>").
template <class T>
BlockTensors<T> block_tensors(T* base, const ParamTable& table);

// What a block needs besides its tensors: dimensions, the RoPE tables [T, hd/2] and the
// linear layers' precision.
template <class T>
struct BlockContext {
  const ModelConfig* cfg = nullptr;
  int batch = 0;
  // runtime.precision bf16: the GEMMs' operands rounded to bf16 (ops/linear.hpp), the block's
  // weights read from its layer's bf16 copy when the model keeps one.
  GemmPrecision gemm;
  const T* rope_cos = nullptr;
  const T* rope_sin = nullptr;
};

// All pointers are in the op set's memory (host for CpuOps, device for CudaOps; float only there).
// out[B*T, C] = block(x[B*T, C]); saves activations into acts (laid out by `layout`). The
// tiled attention works in scratch's attention slabs (nothing else of scratch is touched).
// A forward again with the same x, weights and buffers reproduces acts and out bit for bit
// (activation recompute relies on it).
template <class T, class Ops = CpuOps>
void block_forward(const BlockContext<T>& ctx, const BlockTensors<T>& w,
                   const BlockActivationLayout& layout, T* acts, const T* x, T* out,
                   const ScratchLayout& scratch_layout, T* scratch);

// On entry scratch.dres holds dL/dout; on exit it holds dL/dx. Adds scale * dL/dparams to dw.
// Reads the activations saved by the last block_forward with the same x (it does not change
// them, so backward may run again).
template <class T, class Ops = CpuOps>
void block_backward(const BlockContext<T>& ctx, const BlockTensors<T>& w,
                    const BlockTensors<T>& dw, const BlockActivationLayout& layout,
                    const T* acts, const T* x, const ScratchLayout& scratch_layout, T* scratch,
                    T scale);

}  // namespace asteria
