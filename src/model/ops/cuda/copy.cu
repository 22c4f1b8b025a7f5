// Copies on CUDA: device-to-device cudaMemcpy(2D)Async on the current stream (contract:
// ops/copy.hpp).
#include "model/ops/copy.hpp"
#include "model/ops/cuda/kernel_util.cuh"

namespace asteria::ops::cuda {

template <>
void copy<float>(float* dst, const float* src, size_t n) {
  if (n == 0) return;
  ASTERIA_CUDA_CHECK(cudaMemcpyAsync(dst, src, n * sizeof(float), cudaMemcpyDeviceToDevice,
                                     asteria::cuda::current_stream()));
}

template <>
void copy_columns<float>(float* dst, int ld_dst, const float* src, int ld_src, int rows, int cols) {
  if (rows == 0 || cols == 0) return;
  ASTERIA_CUDA_CHECK(cudaMemcpy2DAsync(dst, sizeof(float) * ld_dst, src, sizeof(float) * ld_src,
                                       sizeof(float) * cols, rows, cudaMemcpyDeviceToDevice,
                                       asteria::cuda::current_stream()));
}

}  // namespace asteria::ops::cuda
