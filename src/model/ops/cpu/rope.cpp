#include "model/ops/rope.hpp"

#include <cmath>
#include <cstddef>
#include "model/ops/parallel.hpp"

namespace asteria::ops {

template <class T>
void rope_tables(T* cos_table, T* sin_table, int seq_len, int head_dim, double theta) {
  const int half = head_dim / 2;
  for (int t = 0; t < seq_len; t++)
    for (int i = 0; i < half; i++) {
      const double freq = std::pow(theta, -2.0 * i / head_dim);
      const double angle = t * freq;
      cos_table[static_cast<size_t>(t) * half + i] = static_cast<T>(std::cos(angle));
      sin_table[static_cast<size_t>(t) * half + i] = static_cast<T>(std::sin(angle));
    }
}

namespace {

// sign = +1 rotates by +angle (forward), -1 by -angle (backward).
template <class T>
void rotate(T* x, int ld, int N, int seq_len, int n_heads, int head_dim, const T* cos_table,
            const T* sin_table, T sign) {
  const int half = head_dim / 2;
#pragma omp parallel for schedule(static) if (worth_parallel(size_t(N) * n_heads * head_dim))
  for (int n = 0; n < N; n++) {
    const int t = n % seq_len;
    const T* cs = cos_table + static_cast<size_t>(t) * half;  // [hd/2]
    const T* sn = sin_table + static_cast<size_t>(t) * half;  // [hd/2]
    for (int h = 0; h < n_heads; h++) {
      T* a = x + static_cast<size_t>(n) * ld + static_cast<size_t>(h) * head_dim;  // [hd/2]
      T* b = a + half;                                                             // [hd/2]
#pragma omp simd
      for (int i = 0; i < half; i++) {
        const T s = sign * sn[i];
        const T xa = a[i], xb = b[i];
        a[i] = xa * cs[i] - xb * s;
        b[i] = xb * cs[i] + xa * s;
      }
    }
  }
}

}  // namespace

template <class T>
void rope_forward(T* x, int ld, int N, int seq_len, int n_heads, int head_dim, const T* cos_table,
                  const T* sin_table) {
  rotate(x, ld, N, seq_len, n_heads, head_dim, cos_table, sin_table, T(1));
}

template <class T>
void rope_backward(T* dx, int ld, int N, int seq_len, int n_heads, int head_dim,
                   const T* cos_table, const T* sin_table) {
  rotate(dx, ld, N, seq_len, n_heads, head_dim, cos_table, sin_table, T(-1));
}

template void rope_tables<float>(float*, float*, int, int, double);
template void rope_tables<double>(double*, double*, int, int, double);
template void rope_forward<float>(float*, int, int, int, int, int, const float*, const float*);
template void rope_forward<double>(double*, int, int, int, int, int, const double*,
                                   const double*);
template void rope_backward<float>(float*, int, int, int, int, int, const float*, const float*);
template void rope_backward<double>(double*, int, int, int, int, int, const double*,
                                    const double*);

}  // namespace asteria::ops
