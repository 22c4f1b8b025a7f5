#include "model/activation_layout.hpp"

#include <omp.h>

#include <algorithm>

#include "model/model.hpp"
#include "model/ops/attention_tiled.hpp"

namespace asteria {

BlockActivationLayout block_activation_layout(const ModelConfig& cfg, int batch) {
  const size_t C = cfg.d_model, F = cfg.mlp_hidden, T = cfg.seq_len, N = batch * T;
  const bool layernorm = cfg.norm == NormKind::LayerNorm;
  SpanCarver c;
  BlockActivationLayout l;
  l.x1 = c.take(N * C);
  l.att_nx = c.take(N * C);
  l.att_mean = c.take(layernorm ? N : 0);
  l.att_rstd = c.take(N);
  l.qkv = c.take(N * 3 * C);
  l.qkv_raw = c.take(cfg.qk_norm ? N * 3 * C : 0);
  l.q_rstd = c.take(cfg.qk_norm ? N : 0);
  l.k_rstd = c.take(cfg.qk_norm ? N : 0);
  const bool tiled = cfg.attention == AttentionKind::Tiled;
  l.att = c.take(static_cast<size_t>(batch) * cfg.n_heads * (tiled ? 2 * T : T * T));
  l.atty = c.take(N * C);
  l.mlp_nx = c.take(N * C);
  l.mlp_mean = c.take(layernorm ? N : 0);
  l.mlp_rstd = c.take(N);
  l.up = c.take(N * 2 * F);
  l.act = c.take(N * F);
  l.total = c.total;
  return l;
}

BlockStorageLayout block_storage_layout(const ModelConfig& cfg, const BlockActivationLayout& l) {
  const bool tiled = cfg.attention == AttentionKind::Tiled;
  BlockStorageLayout s;
  auto keep = [](std::vector<PackedSpan>& kind, size_t& elems, const Span& span) {
    if (span.size == 0) return;
    kind.push_back({span, elems});
    elems += span.size;
  };
  for (const Span* span : {&l.att_nx, &l.qkv, &l.qkv_raw, &l.atty, &l.mlp_nx, &l.up, &l.act})
    keep(s.bf16, s.bf16_elems, *span);
  keep(tiled ? s.fp32 : s.bf16, tiled ? s.fp32_elems : s.bf16_elems, l.att);
  for (const Span* span : {&l.x1, &l.att_mean, &l.att_rstd, &l.q_rstd, &l.k_rstd, &l.mlp_mean, &l.mlp_rstd})
    keep(s.fp32, s.fp32_elems, *span);
  return s;
}

HeadActivationLayout head_activation_layout(const ModelConfig& cfg, int batch) {
  const size_t C = cfg.d_model, N = static_cast<size_t>(batch) * cfg.seq_len;
  SpanCarver c;
  HeadActivationLayout l;
  l.xf = c.take(N * C);
  l.mean = c.take(cfg.norm == NormKind::LayerNorm ? N : 0);
  l.rstd = c.take(N);
  // Chunked: one chunk's logits, recomputed in the backward.
  const size_t rows = cfg.head_chunk > 0 ? std::min(N, static_cast<size_t>(cfg.head_chunk)) : N;
  l.logits = c.take(rows * cfg.embedding_size);
  l.total = c.total;
  return l;
}

ScratchLayout scratch_layout(const ModelConfig& cfg, int batch, int att_slabs) {
  const size_t C = cfg.d_model, F = cfg.mlp_hidden, T = cfg.seq_len, N = batch * T;
  SpanCarver c;
  ScratchLayout l;
  l.dres = c.take(N * C);
  l.dnx = c.take(N * C);
  l.dmid = c.take(N * std::max(C, F));
  l.dwide = c.take(N * std::max(3 * C, 2 * F));
  const size_t slab = cfg.attention == AttentionKind::Tiled
                          ? ops::attention_tiled_scratch_per_thread(cfg.seq_len)
                          : T * T;
  l.att = c.take(static_cast<size_t>(att_slabs) * slab);
  l.att_slabs = att_slabs;
  l.total = c.total;
  return l;
}

size_t model_activation_bytes(const ModelConfig& cfg, int batch, const ActivationRecompute& recompute,
                              ComputePrecision precision) {
  const size_t N = static_cast<size_t>(batch) * cfg.seq_len;
  const size_t residual = (cfg.n_layers + 1) * N * cfg.d_model;  // x_0 .. x_L
  const int kept = cfg.n_layers - recompute.recomputed_blocks(cfg.n_layers);
  const BlockActivationLayout block = block_activation_layout(cfg, batch);
  const size_t fp32 = residual + head_activation_layout(cfg, batch).total +
                      scratch_layout(cfg, batch, omp_get_max_threads()).total;
  if (precision == ComputePrecision::Bf16) {
    // Every block works in one fp32 buffer; the kept ones pack their activations.
    const BlockStorageLayout packed = block_storage_layout(cfg, block);
    return (fp32 + block.total + kept * packed.fp32_elems) * sizeof(float) + kept * packed.bf16_elems * sizeof(uint16_t);
  }
  const size_t block_buffers = kept + (kept < cfg.n_layers ? 1 : 0);
  return (fp32 + block_buffers * block.total) * sizeof(float);
}

}  // namespace asteria
