#pragma once
// Non-parametric LayerNorm (OLMo-1): no weight, no bias. Rows are normalized to zero mean and
// unit variance: y = (x - mean) * rstd, rstd = 1 / sqrt(var + eps) (biased variance).

namespace asteria::ops {

// out[N, C] = (residual[N, C] if not null) + (inp[N, C] - mean) * rstd
// Saves mean[N] and rstd[N] for backward.
template <class T>
void layernorm_forward(T* out, T* mean, T* rstd, const T* inp, const T* residual, int N, int C,
                       double eps);

// dinp[N, C] (= or +=) dL/dinp given dout[N, C] = dL/dout. dinp may alias dout when
// accumulate is false (each row is read fully before it is written).
template <class T>
void layernorm_backward(T* dinp, const T* dout, const T* inp, const T* mean, const T* rstd, int N,
                        int C, bool accumulate);

}  // namespace asteria::ops
