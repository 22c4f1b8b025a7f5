#pragma once
// Where each activation lives inside the model's activation buffers, as element offsets.
// One function computes the layout for both the allocation (Model) and the report
// (model_activation_bytes), so the two cannot drift apart. Every piece starts 64-byte aligned.
#include <cstddef>
#include <vector>

#include "model/model_config.hpp"

namespace asteria {

// A range of a buffer; size 0 means the tensor does not exist in this configuration.
struct Span {
  size_t offset = 0;
  size_t size = 0;
  template <class T>
  T* in(T* base) const {
    return size ? base + offset : nullptr;
  }
};

// Hands out consecutive spans, each rounded up to 16 elements.
struct SpanCarver {
  size_t total = 0;
  Span take(size_t n) {
    Span s{total, n};
    total += (n + 15) / 16 * 16;
    return s;
  }
};

// Saved by one block's forward for its backward (N = B*T rows).
struct BlockActivationLayout {
  Span x1;                  // [N, C]   residual stream after the attention sublayer
  Span att_nx;              // [N, C]   pre: norm(x) fed to att_qkv; post: att_out output
  Span att_mean, att_rstd;  // [N]      statistics of that norm (mean: LayerNorm only)
  Span qkv;                 // [N, 3C]  attention input (after QK-norm and RoPE)
  Span qkv_raw;             // [N, 3C]  att_qkv output before QK-norm (qk_norm only)
  Span q_rstd, k_rstd;      // [N]      QK-norm statistics (qk_norm only)
  Span att;                 // full attention: [B, NH, T, T] softmax probabilities;
                            // tiled: [B, NH, 2, T] their row statistics (ops/attention_tiled.hpp)
  Span atty;                // [N, C]   attention output (heads concatenated)
  Span mlp_nx;              // [N, C]   pre: norm(x1) fed to mlp_up; post: mlp_down output
  Span mlp_mean, mlp_rstd;  // [N]
  Span up;                  // [N, 2F]  mlp_up output (x | gate)
  Span act;                 // [N, F]   SwiGLU output
  size_t total = 0;
};

// runtime.precision bf16 keeps what a block saves for its backward as bf16 (model.hpp): the
// [N, *] tensors read by the GEMMs, attention, SwiGLU and the norms' backward, and the full
// attention's probabilities. Kept fp32: the residual stream x1 (as every x_l: the sums that carry
// the model), the norms' statistics, and the tiled attention's row statistics (a log-sum-exp
// rounded to 8 bits would scale every probability of its row). Each kind is packed densely, in
// layout order, into a buffer of its own.
struct PackedSpan {
  Span in_layout;        // where the tensor is in the block's (fp32) activation buffer
  size_t packed = 0;     // where it starts in its packed buffer
};
struct BlockStorageLayout {
  std::vector<PackedSpan> bf16, fp32;
  size_t bf16_elems = 0, fp32_elems = 0;
};
BlockStorageLayout block_storage_layout(const ModelConfig& cfg, const BlockActivationLayout& layout);

// Saved by the head's forward (the logits are overwritten by their gradient).
struct HeadActivationLayout {
  Span xf;                  // [N, C]   final norm output
  Span mean, rstd;          // [N]
  Span logits;              // [N, V]   logits, then dL/dlogits; with model.head_chunk k, [k, V]
                            //          scratch for one chunk (head.hpp)
  size_t total = 0;
};

// Backward scratch shared by all layers (only one layer runs backward at a time).
struct ScratchLayout {
  Span dres;                // [N, C]   dL/d(residual stream), flows from the head to the embedding
  Span dnx;                 // [N, C]   gradient at a norm's output / a sublayer's output
  Span dmid;                // [N, max(C, F)]   datty in attention, dact in the MLP
  Span dwide;               // [N, max(3C, 2F)] dqkv in attention, dup in the MLP
  Span att;                 // per-thread attention slabs: full attention [threads, T, T]
                            // (backward); tiled [threads, 2 * row block * T] (both directions)
  int att_slabs = 0;
  size_t total = 0;
};

BlockActivationLayout block_activation_layout(const ModelConfig& cfg, int batch);
HeadActivationLayout head_activation_layout(const ModelConfig& cfg, int batch);
// att_slabs = number of threads that may run attention backward (omp_get_max_threads()).
ScratchLayout scratch_layout(const ModelConfig& cfg, int batch, int att_slabs);

}  // namespace asteria
