#include "model/head.hpp"

#include <algorithm>

#include "model/norm.hpp"
#include "model/ops/op_set.hpp"

namespace asteria {

namespace {

// Rows of the LM head at once (model.head_chunk; all N when 0 or larger).
int head_rows(const ModelConfig& cfg, int N) { return cfg.head_chunk > 0 ? std::min(cfg.head_chunk, N) : N; }

}  // namespace

template <class T, class Ops>
ops::CrossEntropyResult head_forward(const ModelConfig& cfg, int batch, const GemmPrecision& gemm, const HeadTensors<T>& w,
                                     const HeadActivationLayout& L, T* acts, const T* x,
                                     const int32_t* targets) {
  const int C = cfg.d_model, E = cfg.embedding_size, N = batch * cfg.seq_len;
  T* xf = L.xf.in(acts);          // [N, C]
  T* logits = L.logits.in(acts);  // [N, E]
  norm_forward<Ops>(cfg.norm, xf, L.mean.in(acts), L.rstd.in(acts), x, w.norm_f,
               static_cast<const T*>(nullptr), N, C, cfg.norm_eps);
  const int chunk = head_rows(cfg, N);
  ops::CrossEntropyResult total;
  for (int r = 0; r < N; r += chunk) {
    const int n = std::min(chunk, N - r);
    linear_forward_at<Ops>(gemm, logits, xf + static_cast<size_t>(r) * C, w.lm_head, n, C, E, false);
    const ops::CrossEntropyResult part = Ops::cross_entropy_fused(logits, targets + r, n, E, cfg.z_loss, N);
    total.ce += part.ce;
    total.z += part.z;
  }
  return total;
}

template <class T, class Ops>
void head_backward(const ModelConfig& cfg, int batch, const GemmPrecision& gemm, const HeadTensors<T>& w,
                   const HeadTensors<T>& dw, const HeadActivationLayout& L, T* acts,
                   const T* x, const int32_t* targets, const ScratchLayout& S, T* scratch, T scale) {
  const int C = cfg.d_model, E = cfg.embedding_size, N = batch * cfg.seq_len;
  const T* xf = L.xf.in(acts);            // [N, C]
  T* dlogits = L.logits.in(acts);         // [N, E], or one chunk's [k, E]
  T* dxf = S.dnx.in(scratch);             // [N, C]
  T* dx = S.dres.in(scratch);             // [N, C]
  const int chunk = head_rows(cfg, N);
  if (chunk == N) {
    linear_backward_at<Ops>(gemm, dxf, dw.lm_head, dlogits, xf, w.lm_head, N, C, E, scale, false);
  } else {
    // The chunk's logits again, and their gradient as the forward's fused pass left it.
    for (int r = 0; r < N; r += chunk) {
      const int n = std::min(chunk, N - r);
      const T* xr = xf + static_cast<size_t>(r) * C;
      linear_forward_at<Ops>(gemm, dlogits, xr, w.lm_head, n, C, E, false);
      Ops::cross_entropy_fused(dlogits, targets + r, n, E, cfg.z_loss, N);
      linear_backward_at<Ops>(gemm, dxf + static_cast<size_t>(r) * C, dw.lm_head, dlogits, xr, w.lm_head, n, C, E, scale, false);
    }
  }
  norm_backward<Ops>(cfg.norm, dx, dw.norm_f, dxf, x, w.norm_f, L.mean.in(acts), L.rstd.in(acts), N,
                C, scale, false);
}

#define ASTERIA_INSTANTIATE_HEAD(T, Ops)                                                               \
  template ops::CrossEntropyResult head_forward<T, Ops>(const ModelConfig&, int, const GemmPrecision&, const HeadTensors<T>&, \
                                                        const HeadActivationLayout&, T*, const T*,      \
                                                        const int32_t*);                                \
  template void head_backward<T, Ops>(const ModelConfig&, int, const GemmPrecision&, const HeadTensors<T>&,                   \
                                      const HeadTensors<T>&, const HeadActivationLayout&, T*, const T*, \
                                      const int32_t*, const ScratchLayout&, T*, T);
ASTERIA_INSTANTIATE_HEAD(float, CpuOps)
ASTERIA_INSTANTIATE_HEAD(double, CpuOps)
#ifdef ASTERIA_HAVE_CUDA
ASTERIA_INSTANTIATE_HEAD(float, CudaOps)
#endif

}  // namespace asteria
