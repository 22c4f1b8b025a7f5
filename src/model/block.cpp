#include "model/block.hpp"

#include <string>

#include "core/error.hpp"
#include "model/norm.hpp"
#include "model/ops/op_set.hpp"

namespace asteria {

template <class T>
BlockTensors<T> block_tensors(T* base, const ParamTable& table) {
  BlockTensors<T> v;
  for (const auto& e : table.entries) {
    const std::string tensor = e.name.substr(e.name.rfind('.') + 1);
    T* p = base + e.offset;
    if (tensor == "att_norm") v.att_norm = p;
    else if (tensor == "att_qkv") v.att_qkv = p;
    else if (tensor == "q_norm") v.q_norm = p;
    else if (tensor == "k_norm") v.k_norm = p;
    else if (tensor == "att_out") v.att_out = p;
    else if (tensor == "mlp_norm") v.mlp_norm = p;
    else if (tensor == "mlp_up") v.mlp_up = p;
    else if (tensor == "mlp_down") v.mlp_down = p;
    else ASTERIA_ASSERT(false, "unknown block tensor ", e.name);
  }
  return v;
}

namespace {

// The attention sublayer up to (not including) att_out: h[N, C] -> atty[N, C].
template <class T, class Ops>
void attention_sublayer_forward(const BlockContext<T>& ctx, const BlockTensors<T>& w,
                                const BlockActivationLayout& L, T* acts, const T* h,
                                const ScratchLayout& S, T* scratch) {
  const ModelConfig& cfg = *ctx.cfg;
  const int C = cfg.d_model, NH = cfg.n_heads, hd = cfg.head_dim(), Tn = cfg.seq_len;
  const int N = ctx.batch * Tn;
  T* qkv = L.qkv.in(acts);  // [N, 3C]
  if (cfg.qk_norm) {
    T* raw = L.qkv_raw.in(acts);  // [N, 3C]
    linear_forward_at<Ops>(ctx.gemm, raw, h, w.att_qkv, N, C, 3 * C, false);
    Ops::rmsnorm_forward(qkv, 3 * C, L.q_rstd.in(acts), raw, 3 * C, w.q_norm,
                         static_cast<const T*>(nullptr), N, C, cfg.norm_eps);
    Ops::rmsnorm_forward(qkv + C, 3 * C, L.k_rstd.in(acts), raw + C, 3 * C, w.k_norm,
                         static_cast<const T*>(nullptr), N, C, cfg.norm_eps);
    Ops::copy_columns(qkv + 2 * C, 3 * C, raw + 2 * C, 3 * C, N, C);
  } else {
    linear_forward_at<Ops>(ctx.gemm, qkv, h, w.att_qkv, N, C, 3 * C, false);
  }
  // q and k are adjacent in a row: rotate them as 2*NH heads in one pass.
  Ops::rope_forward(qkv, 3 * C, N, Tn, 2 * NH, hd, ctx.rope_cos, ctx.rope_sin);
  if (cfg.attention == AttentionKind::Tiled)
    Ops::attention_tiled_forward(L.atty.in(acts), L.att.in(acts), S.att.in(scratch), S.att_slabs,
                                 static_cast<const T*>(qkv), ctx.batch, Tn, C, NH);
  else
    Ops::attention_forward(L.atty.in(acts), L.att.in(acts), static_cast<const T*>(qkv), ctx.batch, Tn, C, NH);
}

// Backward of attention_sublayer_forward: datty[N, C] -> dqkv[N, 3C] = dL/d(att_qkv output).
template <class T, class Ops>
void attention_sublayer_backward(const BlockContext<T>& ctx, const BlockTensors<T>& w,
                                 const BlockTensors<T>& dw, const BlockActivationLayout& L,
                                 const T* acts, const T* datty, T* dqkv, T* att_scratch,
                                 int att_slabs, T scale) {
  const ModelConfig& cfg = *ctx.cfg;
  const int C = cfg.d_model, NH = cfg.n_heads, hd = cfg.head_dim(), Tn = cfg.seq_len;
  const int N = ctx.batch * Tn;
  if (cfg.attention == AttentionKind::Tiled)
    Ops::attention_tiled_backward(dqkv, att_scratch, att_slabs, datty, L.qkv.in(acts),
                                  L.att.in(acts), ctx.batch, Tn, C, NH);
  else
    Ops::attention_backward(dqkv, att_scratch, att_slabs, datty, L.qkv.in(acts), L.att.in(acts),
                            ctx.batch, Tn, C, NH);
  Ops::rope_backward(dqkv, 3 * C, N, Tn, 2 * NH, hd, ctx.rope_cos, ctx.rope_sin);
  if (cfg.qk_norm) {
    const T* raw = L.qkv_raw.in(acts);
    // In place: dq/dk of the normalized vectors become those of the raw projections.
    Ops::rmsnorm_backward(dqkv, 3 * C, dw.q_norm, dqkv, 3 * C, raw, 3 * C, w.q_norm,
                          L.q_rstd.in(acts), N, C, scale, false);
    Ops::rmsnorm_backward(dqkv + C, 3 * C, dw.k_norm, dqkv + C, 3 * C, raw + C, 3 * C, w.k_norm,
                          L.k_rstd.in(acts), N, C, scale, false);
  }
}

}  // namespace

template <class T, class Ops>
void block_forward(const BlockContext<T>& ctx, const BlockTensors<T>& w,
                   const BlockActivationLayout& L, T* acts, const T* x, T* out,
                   const ScratchLayout& S, T* scratch) {
  const ModelConfig& cfg = *ctx.cfg;
  const int C = cfg.d_model, F = cfg.mlp_hidden, N = ctx.batch * cfg.seq_len;
  const size_t NC = static_cast<size_t>(N) * C;
  const NormKind kind = cfg.norm;
  T* x1 = L.x1.in(acts);          // [N, C]
  T* att_nx = L.att_nx.in(acts);  // [N, C]
  T* mlp_nx = L.mlp_nx.in(acts);  // [N, C]
  T* up = L.up.in(acts);          // [N, 2F]
  T* act = L.act.in(acts);        // [N, F]

  if (cfg.norm_placement == NormPlacement::Pre) {
    norm_forward<Ops>(kind, att_nx, L.att_mean.in(acts), L.att_rstd.in(acts), x, w.att_norm,
                 static_cast<const T*>(nullptr), N, C, cfg.norm_eps);
    attention_sublayer_forward<T, Ops>(ctx, w, L, acts, att_nx, S, scratch);
    Ops::copy(x1, x, NC);
    linear_forward_at<Ops>(ctx.gemm, x1, L.atty.in(acts), w.att_out, N, C, C, true);  // x1 = x + att
    norm_forward<Ops>(kind, mlp_nx, L.mlp_mean.in(acts), L.mlp_rstd.in(acts), x1, w.mlp_norm,
                 static_cast<const T*>(nullptr), N, C, cfg.norm_eps);
    linear_forward_at<Ops>(ctx.gemm, up, mlp_nx, w.mlp_up, N, C, 2 * F, false);
    Ops::swiglu_forward(act, up, N, F);
    Ops::copy(out, x1, NC);
    linear_forward_at<Ops>(ctx.gemm, out, act, w.mlp_down, N, F, C, true);  // out = x1 + mlp
  } else {
    attention_sublayer_forward<T, Ops>(ctx, w, L, acts, x, S, scratch);
    linear_forward_at<Ops>(ctx.gemm, att_nx, L.atty.in(acts), w.att_out, N, C, C, false);
    norm_forward<Ops>(kind, x1, L.att_mean.in(acts), L.att_rstd.in(acts), att_nx, w.att_norm, x, N, C,
                 cfg.norm_eps);  // x1 = x + norm(att)
    linear_forward_at<Ops>(ctx.gemm, up, x1, w.mlp_up, N, C, 2 * F, false);
    Ops::swiglu_forward(act, up, N, F);
    linear_forward_at<Ops>(ctx.gemm, mlp_nx, act, w.mlp_down, N, F, C, false);
    norm_forward<Ops>(kind, out, L.mlp_mean.in(acts), L.mlp_rstd.in(acts), mlp_nx, w.mlp_norm, x1, N,
                 C, cfg.norm_eps);  // out = x1 + norm(mlp)
  }
}

template <class T, class Ops>
void block_backward(const BlockContext<T>& ctx, const BlockTensors<T>& w,
                    const BlockTensors<T>& dw, const BlockActivationLayout& L, const T* acts,
                    const T* x, const ScratchLayout& S, T* scratch, T scale) {
  const ModelConfig& cfg = *ctx.cfg;
  const int C = cfg.d_model, F = cfg.mlp_hidden, N = ctx.batch * cfg.seq_len;
  const NormKind kind = cfg.norm;
  const T* x1 = L.x1.in(acts);          // [N, C]
  const T* att_nx = L.att_nx.in(acts);  // [N, C]
  const T* mlp_nx = L.mlp_nx.in(acts);  // [N, C]
  const T* up = L.up.in(acts);          // [N, 2F]
  const T* act = L.act.in(acts);        // [N, F]
  const T* atty = L.atty.in(acts);      // [N, C]
  T* dres = S.dres.in(scratch);         // [N, C]  dL/dout on entry, dL/dx on exit
  T* dnx = S.dnx.in(scratch);           // [N, C]
  T* dmid = S.dmid.in(scratch);         // [N, F] as dact, [N, C] as datty
  T* dwide = S.dwide.in(scratch);       // [N, 2F] as dup, [N, 3C] as dqkv
  T* att_scratch = S.att.in(scratch);

  if (cfg.norm_placement == NormPlacement::Pre) {
    // MLP: out = x1 + mlp_down(swiglu(mlp_up(norm(x1))))
    linear_backward_at<Ops>(ctx.gemm, dmid, dw.mlp_down, dres, act, w.mlp_down, N, F, C, scale, false);
    Ops::swiglu_backward(dwide, dmid, up, N, F);
    linear_backward_at<Ops>(ctx.gemm, dnx, dw.mlp_up, dwide, mlp_nx, w.mlp_up, N, C, 2 * F, scale, false);
    norm_backward<Ops>(kind, dres, dw.mlp_norm, dnx, x1, w.mlp_norm, L.mlp_mean.in(acts),
                  L.mlp_rstd.in(acts), N, C, scale, true);
    // Attention: x1 = x + att_out(attention(norm(x)))
    linear_backward_at<Ops>(ctx.gemm, dmid, dw.att_out, dres, atty, w.att_out, N, C, C, scale, false);
    attention_sublayer_backward<T, Ops>(ctx, w, dw, L, acts, dmid, dwide, att_scratch, S.att_slabs,
                                scale);
    linear_backward_at<Ops>(ctx.gemm, dnx, dw.att_qkv, dwide, att_nx, w.att_qkv, N, C, 3 * C, scale, false);
    norm_backward<Ops>(kind, dres, dw.att_norm, dnx, x, w.att_norm, L.att_mean.in(acts),
                  L.att_rstd.in(acts), N, C, scale, true);
  } else {
    // MLP: out = x1 + norm(mlp_down(swiglu(mlp_up(x1))))
    norm_backward<Ops>(kind, dnx, dw.mlp_norm, dres, mlp_nx, w.mlp_norm, L.mlp_mean.in(acts),
                  L.mlp_rstd.in(acts), N, C, scale, false);
    linear_backward_at<Ops>(ctx.gemm, dmid, dw.mlp_down, dnx, act, w.mlp_down, N, F, C, scale, false);
    Ops::swiglu_backward(dwide, dmid, up, N, F);
    linear_backward_at<Ops>(ctx.gemm, dres, dw.mlp_up, dwide, x1, w.mlp_up, N, C, 2 * F, scale, true);
    // Attention: x1 = x + norm(att_out(attention(x)))
    norm_backward<Ops>(kind, dnx, dw.att_norm, dres, att_nx, w.att_norm, L.att_mean.in(acts),
                  L.att_rstd.in(acts), N, C, scale, false);
    linear_backward_at<Ops>(ctx.gemm, dmid, dw.att_out, dnx, atty, w.att_out, N, C, C, scale, false);
    attention_sublayer_backward<T, Ops>(ctx, w, dw, L, acts, dmid, dwide, att_scratch, S.att_slabs,
                                scale);
    linear_backward_at<Ops>(ctx.gemm, dres, dw.att_qkv, dwide, x, w.att_qkv, N, C, 3 * C, scale, true);
  }
}

template BlockTensors<float> block_tensors<float>(float*, const ParamTable&);
template BlockTensors<double> block_tensors<double>(double*, const ParamTable&);

#define ASTERIA_INSTANTIATE_BLOCK(T, Ops)                                                              \
  template void block_forward<T, Ops>(const BlockContext<T>&, const BlockTensors<T>&,                  \
                                      const BlockActivationLayout&, T*, const T*, T*,                  \
                                      const ScratchLayout&, T*);                                       \
  template void block_backward<T, Ops>(const BlockContext<T>&, const BlockTensors<T>&,                 \
                                       const BlockTensors<T>&, const BlockActivationLayout&, const T*, \
                                       const T*, const ScratchLayout&, T*, T);
ASTERIA_INSTANTIATE_BLOCK(float, CpuOps)
ASTERIA_INSTANTIATE_BLOCK(double, CpuOps)
#ifdef ASTERIA_HAVE_CUDA
ASTERIA_INSTANTIATE_BLOCK(float, CudaOps)
#endif

}  // namespace asteria
