#include "model/ops/layernorm.hpp"

#include <cmath>
#include <cstddef>
#include "model/ops/parallel.hpp"

namespace asteria::ops {

template <class T>
void layernorm_forward(T* out, T* mean, T* rstd, const T* inp, const T* residual, int N, int C,
                       double eps) {
#pragma omp parallel for schedule(static) if (worth_parallel(size_t(N) * C))
  for (int n = 0; n < N; n++) {
    const T* x = inp + static_cast<size_t>(n) * C;   // [C]
    T* y = out + static_cast<size_t>(n) * C;         // [C]
    T sum = 0;
#pragma omp simd reduction(+ : sum)
    for (int c = 0; c < C; c++) sum += x[c];
    const T m = sum / C;
    // Two passes (mean, then squared deviations) keep the variance accurate in float.
    T sq = 0;
#pragma omp simd reduction(+ : sq)
    for (int c = 0; c < C; c++) sq += (x[c] - m) * (x[c] - m);
    const T s = T(1) / std::sqrt(sq / C + T(eps));
    if (residual) {
      const T* r = residual + static_cast<size_t>(n) * C;
#pragma omp simd
      for (int c = 0; c < C; c++) y[c] = r[c] + (x[c] - m) * s;
    } else {
#pragma omp simd
      for (int c = 0; c < C; c++) y[c] = (x[c] - m) * s;
    }
    mean[n] = m;
    rstd[n] = s;
  }
}

template <class T>
void layernorm_backward(T* dinp, const T* dout, const T* inp, const T* mean, const T* rstd, int N,
                        int C, bool accumulate) {
  // With xhat = (x - mean) * rstd and g = dL/dy:
  //   dL/dx = rstd * (g - mean(g) - xhat * mean(g * xhat))
#pragma omp parallel for schedule(static) if (worth_parallel(size_t(N) * C))
  for (int n = 0; n < N; n++) {
    const T* x = inp + static_cast<size_t>(n) * C;    // [C]
    const T* g = dout + static_cast<size_t>(n) * C;   // [C]
    T* dx = dinp + static_cast<size_t>(n) * C;        // [C]
    const T m = mean[n], s = rstd[n];
    T sum_g = 0, sum_gx = 0;
#pragma omp simd reduction(+ : sum_g, sum_gx)
    for (int c = 0; c < C; c++) {
      sum_g += g[c];
      sum_gx += g[c] * (x[c] - m) * s;
    }
    const T mean_g = sum_g / C, mean_gx = sum_gx / C;
    if (accumulate) {
#pragma omp simd
      for (int c = 0; c < C; c++) dx[c] += s * (g[c] - mean_g - (x[c] - m) * s * mean_gx);
    } else {
#pragma omp simd
      for (int c = 0; c < C; c++) dx[c] = s * (g[c] - mean_g - (x[c] - m) * s * mean_gx);
    }
  }
}

template void layernorm_forward<float>(float*, float*, float*, const float*, const float*, int,
                                       int, double);
template void layernorm_forward<double>(double*, double*, double*, const double*, const double*,
                                        int, int, double);
template void layernorm_backward<float>(float*, const float*, const float*, const float*,
                                        const float*, int, int, bool);
template void layernorm_backward<double>(double*, const double*, const double*, const double*,
                                         const double*, int, int, bool);

}  // namespace asteria::ops
