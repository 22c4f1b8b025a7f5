#pragma once
// The head layer: final norm, LM head and loss.
//   xf = norm_f(x); logits = xf W^T; loss = CE(logits, targets) + z_loss * mean(lse^2)
// W is lm_head [E, C] (untied) or wte [E, C] (tied), every one of its E = embedding_size rows:
// as in OLMo (olmo/model.py, OLMo-core's LMHead) and Hugging Face's OLMo classes, the softmax and
// the z-loss's logsumexp run over the padded width too. No target is ever a padding row (ids are
// < vocab_size), so training pushes their logits down and they learn from every token.
// model.head_chunk 0: the forward keeps dL/dlogits [N, E] (fused cross-entropy) for the
// backward. k > 0: rows in chunks of k; the forward computes each chunk's loss and drops its
// logits, the backward computes them again chunk by chunk (one more [k, C] x [C, E] GEMM per
// chunk), so the logits of the whole micro-batch never exist. The same rows give the same
// dL/dlogits either way; the loss sums round in another order.
#include <cstdint>

#include "model/activation_layout.hpp"
#include "model/model_config.hpp"
#include "model/ops/gemm_precision.hpp"
#include "model/ops/cross_entropy.hpp"

namespace asteria {

struct CpuOps;   // model/ops/op_set.hpp: the backend the layer runs on

template <class T>
struct HeadTensors {
  T* norm_f = nullptr;     // [C] (RMSNorm only)
  T* lm_head = nullptr;    // [E, C]: lm_head, or wte when tied
};

// Pointers in the op set's memory (targets too). gemm: the LM head's precision (bf16 operands
// under runtime.precision bf16, ops/linear.hpp, its weight from the model's bf16 copy when kept). Computes the loss parts and leaves dL/dlogits in the activations (fused cross-entropy).
template <class T, class Ops = CpuOps>
ops::CrossEntropyResult head_forward(const ModelConfig& cfg, int batch, const GemmPrecision& gemm, const HeadTensors<T>& w,
                                     const HeadActivationLayout& layout, T* acts, const T* x,
                                     const int32_t* targets);

// Writes dL/dx into scratch.dres; adds scale * dL/dparams to dw. targets: the forward's
// (chunked: the logits are computed again). acts is written only when chunked (the chunk's
// logits scratch).
template <class T, class Ops = CpuOps>
void head_backward(const ModelConfig& cfg, int batch, const GemmPrecision& gemm, const HeadTensors<T>& w,
                   const HeadTensors<T>& dw, const HeadActivationLayout& layout, T* acts,
                   const T* x, const int32_t* targets, const ScratchLayout& scratch_layout, T* scratch, T scale);

}  // namespace asteria
