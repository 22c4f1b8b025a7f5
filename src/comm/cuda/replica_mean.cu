// The replicas' mean on the device: cuBLAS SSCAL (x *= alpha, one fp32 multiply per element,
// as the host loop does) in pieces of at most INT_MAX elements, on a non-blocking stream of the
// calling thread's own (the comm lane's): its input is complete (the all-reduce was waited for),
// and the compute lane's kernels on the default stream need not finish first.
#include <cublas_v2.h>

#include <algorithm>
#include <climits>

#include "core/cuda/cuda_check.hpp"
#include "core/cuda/cuda_context.hpp"
#include "comm/replica_mean.hpp"

namespace asteria::cuda {

void scale_to_mean(float* x, size_t n, int world) {
  thread_local const cudaStream_t own = [] {
    cudaStream_t s = nullptr;
    ASTERIA_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    return s;
  }();
  const StreamScope scope(own);
  const float inv = 1.0f / static_cast<float>(world);
  cublasHandle_t h = thread_cublas();
  for (size_t at = 0; at < n; at += INT_MAX) {
    const int piece = static_cast<int>(std::min<size_t>(INT_MAX, n - at));
    ASTERIA_CUBLAS_CHECK(cublasSscal(h, piece, &inv, x + at, 1));
  }
  ASTERIA_CUDA_CHECK(cudaStreamSynchronize(own));
}

}  // namespace asteria::cuda
