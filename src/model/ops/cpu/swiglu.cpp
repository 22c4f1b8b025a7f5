#include "model/ops/swiglu.hpp"

#include <cstddef>

#include "model/ops/fast_exp.hpp"
#include "model/ops/parallel.hpp"

namespace asteria::ops {

template <class T>
void swiglu_forward(T* out, const T* inp, int N, int F) {
#pragma omp parallel for schedule(static) if (worth_parallel(size_t(N) * F * 8))
  for (int n = 0; n < N; n++) {
    const T* x = inp + static_cast<size_t>(n) * 2 * F;  // [F]
    const T* g = x + F;                                 // [F]
    T* y = out + static_cast<size_t>(n) * F;            // [F]
#pragma omp simd
    for (int i = 0; i < F; i++) {
      const T sig = T(1) / (T(1) + fast_exp(-g[i]));
      y[i] = x[i] * g[i] * sig;
    }
  }
}

template <class T>
void swiglu_backward(T* dinp, const T* dout, const T* inp, int N, int F) {
  // d/dx = silu(g);  d/dg = x * sig * (1 + g * (1 - sig))
#pragma omp parallel for schedule(static) if (worth_parallel(size_t(N) * F * 8))
  for (int n = 0; n < N; n++) {
    const T* x = inp + static_cast<size_t>(n) * 2 * F;  // [F]
    const T* g = x + F;                                 // [F]
    const T* dy = dout + static_cast<size_t>(n) * F;    // [F]
    T* dx = dinp + static_cast<size_t>(n) * 2 * F;      // [F]
    T* dg = dx + F;                                     // [F]
#pragma omp simd
    for (int i = 0; i < F; i++) {
      const T sig = T(1) / (T(1) + fast_exp(-g[i]));
      dx[i] = dy[i] * g[i] * sig;
      dg[i] = dy[i] * x[i] * sig * (T(1) + g[i] * (T(1) - sig));
    }
  }
}

template void swiglu_forward<float>(float*, const float*, int, int);
template void swiglu_forward<double>(double*, const double*, int, int);
template void swiglu_backward<float>(float*, const float*, const float*, int, int);
template void swiglu_backward<double>(double*, const double*, const double*, int, int);

}  // namespace asteria::ops
