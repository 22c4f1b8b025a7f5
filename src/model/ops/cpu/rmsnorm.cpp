#include "model/ops/rmsnorm.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include "model/ops/parallel.hpp"

namespace asteria::ops {

template <class T>
void rmsnorm_forward(T* out, int ldo, T* rstd, const T* inp, int ldi, const T* weight,
                     const T* residual, int N, int C, double eps) {
#pragma omp parallel for schedule(static) if (worth_parallel(size_t(N) * C))
  for (int n = 0; n < N; n++) {
    const T* x = inp + static_cast<size_t>(n) * ldi;   // [C]
    T* y = out + static_cast<size_t>(n) * ldo;         // [C]
    T sq = 0;
#pragma omp simd reduction(+ : sq)
    for (int c = 0; c < C; c++) sq += x[c] * x[c];
    const T s = T(1) / std::sqrt(sq / C + T(eps));
    if (residual) {
      const T* r = residual + static_cast<size_t>(n) * ldo;
#pragma omp simd
      for (int c = 0; c < C; c++) y[c] = r[c] + x[c] * s * weight[c];
    } else {
#pragma omp simd
      for (int c = 0; c < C; c++) y[c] = x[c] * s * weight[c];
    }
    rstd[n] = s;
  }
}

template <class T>
void rmsnorm_backward(T* dinp, int ld_dinp, T* dweight, const T* dout, int ld_dout, const T* inp,
                      int ldi, const T* weight, const T* rstd, int N, int C, T scale,
                      bool accumulate) {
  // The weight gradient first: it reads dout, which dinp may overwrite below. Threads split
  // columns (blocks of 64) and walk all rows, so no reduction across threads is needed.
  constexpr int kBlock = 64;
  const int n_blocks = (C + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(static) if (worth_parallel(size_t(N) * C))
  for (int blk = 0; blk < n_blocks; blk++) {
    const int c0 = blk * kBlock, c1 = std::min(C, c0 + kBlock);
    T acc[kBlock] = {};
    for (int n = 0; n < N; n++) {
      const T* x = inp + static_cast<size_t>(n) * ldi;
      const T* g = dout + static_cast<size_t>(n) * ld_dout;
      const T s = rstd[n];
#pragma omp simd
      for (int c = c0; c < c1; c++) acc[c - c0] += g[c] * x[c] * s;
    }
    for (int c = c0; c < c1; c++) dweight[c] += scale * acc[c - c0];
  }
  // With xhat = x * rstd and gw = dL/dy * w:  dL/dx = rstd * (gw - xhat * mean(gw * xhat))
#pragma omp parallel for schedule(static) if (worth_parallel(size_t(N) * C))
  for (int n = 0; n < N; n++) {
    const T* x = inp + static_cast<size_t>(n) * ldi;       // [C]
    const T* g = dout + static_cast<size_t>(n) * ld_dout;  // [C]
    T* dx = dinp + static_cast<size_t>(n) * ld_dinp;       // [C]
    const T s = rstd[n];
    T dot = 0;
#pragma omp simd reduction(+ : dot)
    for (int c = 0; c < C; c++) dot += g[c] * weight[c] * x[c];
    const T k = dot * s * s / C;  // mean(gw * xhat) * rstd, folded
    if (accumulate) {
#pragma omp simd
      for (int c = 0; c < C; c++) dx[c] += s * (g[c] * weight[c] - x[c] * k);
    } else {
#pragma omp simd
      for (int c = 0; c < C; c++) dx[c] = s * (g[c] * weight[c] - x[c] * k);
    }
  }
}

template void rmsnorm_forward<float>(float*, int, float*, const float*, int, const float*,
                                     const float*, int, int, double);
template void rmsnorm_forward<double>(double*, int, double*, const double*, int, const double*,
                                      const double*, int, int, double);
template void rmsnorm_backward<float>(float*, int, float*, const float*, int, const float*, int,
                                      const float*, const float*, int, int, float, bool);
template void rmsnorm_backward<double>(double*, int, double*, const double*, int, const double*,
                                       int, const double*, const double*, int, int, double, bool);

}  // namespace asteria::ops
