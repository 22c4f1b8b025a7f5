#include "model/ops/embedding.hpp"

#include <algorithm>
#include <cstring>
#include "model/ops/parallel.hpp"

namespace asteria::ops {

template <class T>
void embedding_forward(T* out, const int32_t* tokens, const T* wte, int N, int C) {
#pragma omp parallel for schedule(static) if (worth_parallel(size_t(N) * C))
  for (int n = 0; n < N; n++)
    std::memcpy(out + static_cast<size_t>(n) * C, wte + static_cast<size_t>(tokens[n]) * C,
                sizeof(T) * C);
}

template <class T>
void embedding_backward(T* dwte, const int32_t* tokens, const T* dout, int N, int C, T scale) {
  // Column blocks of 64 keep each thread's rows contiguous and vectorizable.
  constexpr int kBlock = 64;
  const int n_blocks = (C + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(static) if (worth_parallel(size_t(N) * C))
  for (int blk = 0; blk < n_blocks; blk++) {
    const int c0 = blk * kBlock, c1 = std::min(C, c0 + kBlock);
    for (int n = 0; n < N; n++) {
      T* dst = dwte + static_cast<size_t>(tokens[n]) * C;   // [C]
      const T* src = dout + static_cast<size_t>(n) * C;     // [C]
#pragma omp simd
      for (int c = c0; c < c1; c++) dst[c] += scale * src[c];
    }
  }
}

template void embedding_forward<float>(float*, const int32_t*, const float*, int, int);
template void embedding_forward<double>(double*, const int32_t*, const double*, int, int);
template void embedding_backward<float>(float*, const int32_t*, const float*, int, int, float);
template void embedding_backward<double>(double*, const int32_t*, const double*, int, int,
                                         double);

}  // namespace asteria::ops
