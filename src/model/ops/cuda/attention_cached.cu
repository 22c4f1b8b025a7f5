// Attention over the key/value cache on CUDA (contract: ops/attention_cached.hpp): one block per
// (query row, head). The block's threads score the visible keys into shared memory, reduce the
// row's max and sum, then each thread sums its output elements over the keys.
#include "core/error.hpp"
#include "model/ops/attention_cached.hpp"
#include "model/ops/cuda/kernel_util.cuh"

namespace asteria::ops::cuda {

using namespace cuda_detail;

namespace {

constexpr int kThreads = 128;

__global__ void attention_cached_kernel(float* out, const float* q, int ldq, const float* k_cache, const float* v_cache,
                                        int pos, int C, int NH, float scale) {
  extern __shared__ float scores[];   // [pos + n] (the visible keys), then 32 for the reductions
  const int i = blockIdx.x / NH, h = blockIdx.x % NH, hd = C / NH, keys = pos + i + 1;
  float* reduce = scores + (pos + gridDim.x / NH);
  const float* qi = q + static_cast<size_t>(i) * ldq + static_cast<size_t>(h) * hd;
  float mx = -INFINITY;
  for (int j = threadIdx.x; j < keys; j += blockDim.x) {
    const float* kj = k_cache + static_cast<size_t>(j) * C + static_cast<size_t>(h) * hd;
    float dot = 0;
    for (int d = 0; d < hd; d++) dot += qi[d] * kj[d];
    scores[j] = dot * scale;
    mx = fmaxf(mx, scores[j]);
  }
  mx = block_reduce<true>(mx, reduce);
  float sum = 0;
  for (int j = threadIdx.x; j < keys; j += blockDim.x) {
    scores[j] = __expf(scores[j] - mx);
    sum += scores[j];
  }
  const float inv = 1.0f / block_reduce<false>(sum, reduce);   // its barrier publishes the scores
  float* oi = out + static_cast<size_t>(i) * C + static_cast<size_t>(h) * hd;
  for (int d = threadIdx.x; d < hd; d += blockDim.x) {
    float acc = 0;
    for (int j = 0; j < keys; j++) acc += scores[j] * v_cache[static_cast<size_t>(j) * C + static_cast<size_t>(h) * hd + d];
    oi[d] = acc * inv;
  }
}

}  // namespace

template <>
void attention_cached_forward<float>(float* out, const float* q, int ldq, const float* k_cache, const float* v_cache,
                                     int n, int pos, int C, int NH, float* /*scratch*/) {
  if (n == 0) return;
  const size_t shared = (static_cast<size_t>(pos + n) + kWarp) * sizeof(float);
  // The scores of a row live in shared memory: 48 KiB hold about 12K positions.
  ASTERIA_CHECK(shared <= 48 * 1024, "attention over the cache on CUDA: ", pos + n,
                " positions exceed the kernel's shared memory (about 12K positions)");
  attention_cached_kernel<<<n * NH, kThreads, shared, asteria::cuda::current_stream()>>>(
      out, q, ldq, k_cache, v_cache, pos, C, NH, 1.0f / sqrtf(static_cast<float>(C / NH)));
  ASTERIA_CUDA_LAUNCH_CHECK();
}

}  // namespace asteria::ops::cuda
