#pragma once
// The model's norm as one call whatever its kind (config `norm`): non-parametric LayerNorm
// (weight null, mean saved) or RMSNorm (weight [C], mean unused). Contiguous [N, C] rows, on the
// memory of the op set Ops (op_set.hpp).
#include "model/model_config.hpp"
#include "model/ops/op_set.hpp"

namespace asteria {

// out = (residual if not null) + norm(inp)
template <class Ops = CpuOps, class T>
void norm_forward(NormKind kind, T* out, T* mean, T* rstd, const T* inp, const T* weight,
                  const T* residual, int N, int C, double eps) {
  if (kind == NormKind::LayerNorm)
    Ops::layernorm_forward(out, mean, rstd, inp, residual, N, C, eps);
  else
    Ops::rmsnorm_forward(out, C, rstd, inp, C, weight, residual, N, C, eps);
}

// dinp (= or +=) dL/dinp; dweight += scale * dL/dweight (RMSNorm only).
template <class Ops = CpuOps, class T>
void norm_backward(NormKind kind, T* dinp, T* dweight, const T* dout, const T* inp,
                   const T* weight, const T* mean, const T* rstd, int N, int C, T scale,
                   bool accumulate) {
  if (kind == NormKind::LayerNorm)
    Ops::layernorm_backward(dinp, dout, inp, mean, rstd, N, C, accumulate);
  else
    Ops::rmsnorm_backward(dinp, C, dweight, dout, C, inp, C, weight, rstd, N, C, scale,
                          accumulate);
}

}  // namespace asteria
