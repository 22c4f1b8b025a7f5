// Copies on the CPU: parallel over rows (the residual stream is several MB per block).
#include "model/ops/copy.hpp"

#include <cstring>

#include "model/ops/parallel.hpp"

namespace asteria::ops {

template <class T>
void copy(T* dst, const T* src, size_t n) {
#pragma omp parallel for schedule(static) if (worth_parallel(n))
  for (size_t i = 0; i < n; i++) dst[i] = src[i];
}

template <class T>
void copy_columns(T* dst, int ld_dst, const T* src, int ld_src, int rows, int cols) {
#pragma omp parallel for schedule(static) if (worth_parallel(size_t(rows) * cols))
  for (int r = 0; r < rows; r++)
    std::memcpy(dst + static_cast<size_t>(r) * ld_dst, src + static_cast<size_t>(r) * ld_src, sizeof(T) * cols);
}

template void copy<float>(float*, const float*, size_t);
template void copy<double>(double*, const double*, size_t);
template void copy_columns<float>(float*, int, const float*, int, int, int);
template void copy_columns<double>(double*, int, const double*, int, int, int);

}  // namespace asteria::ops
