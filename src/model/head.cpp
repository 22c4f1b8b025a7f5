#include "model/head.hpp"

#include "model/norm.hpp"
#include "model/ops/linear.hpp"

namespace asteria {

template <class T>
ops::CrossEntropyResult head_forward(const ModelConfig& cfg, int batch, const HeadTensors<T>& w,
                                     const HeadActivationLayout& L, T* acts, const T* x,
                                     const int32_t* targets) {
  const int C = cfg.d_model, V = cfg.vocab_size, N = batch * cfg.seq_len;
  T* xf = L.xf.in(acts);          // [N, C]
  T* logits = L.logits.in(acts);  // [N, V]
  norm_forward(cfg.norm, xf, L.mean.in(acts), L.rstd.in(acts), x, w.norm_f,
               static_cast<const T*>(nullptr), N, C, cfg.norm_eps);
  ops::linear_forward(logits, xf, w.lm_head, N, C, V, false);
  return ops::cross_entropy_fused(logits, targets, N, V, cfg.z_loss);
}

template <class T>
void head_backward(const ModelConfig& cfg, int batch, const HeadTensors<T>& w,
                   const HeadTensors<T>& dw, const HeadActivationLayout& L, const T* acts,
                   const T* x, const ScratchLayout& S, T* scratch, T scale) {
  const int C = cfg.d_model, V = cfg.vocab_size, N = batch * cfg.seq_len;
  const T* xf = L.xf.in(acts);            // [N, C]
  const T* dlogits = L.logits.in(acts);   // [N, V]
  T* dxf = S.dnx.in(scratch);             // [N, C]
  T* dx = S.dres.in(scratch);             // [N, C]
  ops::linear_backward(dxf, dw.lm_head, dlogits, xf, w.lm_head, N, C, V, scale, false);
  norm_backward(cfg.norm, dx, dw.norm_f, dxf, x, w.norm_f, L.mean.in(acts), L.rstd.in(acts), N,
                C, scale, false);
}

template ops::CrossEntropyResult head_forward<float>(const ModelConfig&, int,
                                                     const HeadTensors<float>&,
                                                     const HeadActivationLayout&, float*,
                                                     const float*, const int32_t*);
template ops::CrossEntropyResult head_forward<double>(const ModelConfig&, int,
                                                      const HeadTensors<double>&,
                                                      const HeadActivationLayout&, double*,
                                                      const double*, const int32_t*);
template void head_backward<float>(const ModelConfig&, int, const HeadTensors<float>&,
                                   const HeadTensors<float>&, const HeadActivationLayout&,
                                   const float*, const float*, const ScratchLayout&, float*,
                                   float);
template void head_backward<double>(const ModelConfig&, int, const HeadTensors<double>&,
                                    const HeadTensors<double>&, const HeadActivationLayout&,
                                    const double*, const double*, const ScratchLayout&, double*,
                                    double);

}  // namespace asteria
