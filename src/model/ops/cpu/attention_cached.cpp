#include "model/ops/attention_cached.hpp"

#include <cmath>
#include <cstddef>

#include "model/ops/parallel.hpp"

namespace asteria::ops {

template <class T>
void attention_cached_forward(T* out, const T* q, int ldq, const T* k_cache, const T* v_cache, int n, int pos, int C,
                              int NH, T* scratch) {
  const int hd = C / NH, keys = pos + n;
  const T scale = T(1) / std::sqrt(static_cast<T>(hd));
  const size_t work = static_cast<size_t>(n) * NH * keys * hd * 2;
  // One (query row, head) pair per iteration: a single new token still spreads over the heads.
#pragma omp parallel for schedule(static) if (worth_parallel(work))
  for (int ih = 0; ih < n * NH; ih++) {
    const int i = ih / NH, h = ih % NH, last = pos + i;
    const T* qi = q + static_cast<size_t>(i) * ldq + static_cast<size_t>(h) * hd;
    T* s = scratch + static_cast<size_t>(ih) * keys;
    T mx = -INFINITY;
    for (int j = 0; j <= last; j++) {
      const T* kj = k_cache + static_cast<size_t>(j) * C + static_cast<size_t>(h) * hd;
      T dot = 0;
#pragma omp simd reduction(+ : dot)
      for (int d = 0; d < hd; d++) dot += qi[d] * kj[d];
      s[j] = dot * scale;
      mx = s[j] > mx ? s[j] : mx;
    }
    T sum = 0;
    for (int j = 0; j <= last; j++) {
      s[j] = std::exp(s[j] - mx);
      sum += s[j];
    }
    const T inv = T(1) / sum;
    T* oi = out + static_cast<size_t>(i) * C + static_cast<size_t>(h) * hd;
    for (int d = 0; d < hd; d++) oi[d] = 0;
    for (int j = 0; j <= last; j++) {
      const T p = s[j] * inv;
      const T* vj = v_cache + static_cast<size_t>(j) * C + static_cast<size_t>(h) * hd;
#pragma omp simd
      for (int d = 0; d < hd; d++) oi[d] += p * vj[d];
    }
  }
}

template void attention_cached_forward<float>(float*, const float*, int, const float*, const float*, int, int, int, int,
                                               float*);
template void attention_cached_forward<double>(double*, const double*, int, const double*, const double*, int, int, int,
                                                int, double*);

}  // namespace asteria::ops
