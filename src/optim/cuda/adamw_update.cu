// AdamW on the device, bit-identical to the CPU op (contract: optim/adamw_update.hpp): every
// product and sum is a round-to-nearest intrinsic, which nvcc does not fuse into an FMA.
#include "core/cuda/cuda_check.hpp"
#include "core/cuda/cuda_context.hpp"
#include "optim/adamw_update.hpp"

namespace asteria::cuda {

namespace {

__global__ void adamw_kernel(float* w, float* c, float* m, float* v, const float* g, float grad_scale, size_t n,
                             AdamWCoefficients k) {
  const size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float gi = __fmul_rn(g[i], grad_scale);
  const float mi = __fadd_rn(__fmul_rn(k.b1, m[i]), __fmul_rn(k.a1, gi));
  const float vi = __fadd_rn(__fmul_rn(k.b2, v[i]), __fmul_rn(__fmul_rn(k.a2, gi), gi));
  m[i] = mi;
  v[i] = vi;
  const float denom = __fadd_rn(__fmul_rn(__fsqrt_rn(vi), k.inv_sqrt_bc2), k.eps);
  const float delta = -__fadd_rn(__fdiv_rn(__fmul_rn(k.step_size, mi), denom), __fmul_rn(k.wd, w[i]));
  if (c) {
    const float y = __fsub_rn(delta, c[i]);
    const float t = __fadd_rn(w[i], y);
    c[i] = __fsub_rn(__fsub_rn(t, w[i]), y);
    w[i] = t;
  } else {
    w[i] = __fadd_rn(w[i], delta);
  }
}

}  // namespace

void adamw_update(float* w, float* c, float* m, float* v, const float* g, float grad_scale, size_t n,
                  const AdamWCoefficients& k) {
  if (n == 0) return;
  constexpr int kThreads = 256;
  adamw_kernel<<<static_cast<unsigned>((n + kThreads - 1) / kThreads), kThreads, 0, current_stream()>>>(
      w, c, m, v, g, grad_scale, n, k);
  ASTERIA_CUDA_LAUNCH_CHECK();
}

}  // namespace asteria::cuda
