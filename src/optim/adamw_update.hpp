#pragma once
// The AdamW update of one contiguous range, as an op with one signature per backend (the
// optimizer's counterpart of model/ops/): AdamW (adamw.hpp) calls the CPU one per owned tensor;
// the CUDA one updates device-resident state. Both do the same fp32 operations in the same
// order, with no fused multiply-adds (the CPU file is compiled with -ffp-contract=off, since
// GCC contracts C++ under -mfma; the CUDA kernel uses round-to-nearest intrinsics, which nvcc
// never contracts), and IEEE sqrt and division on both, so they give the same bits.
//   m = b1 m + a1 g;  v = b2 v + a2 g^2          (g = grad * grad_scale, a = 1 - b in double)
//   delta = -(step_size m / (sqrt(v) inv_sqrt_bc2 + eps) + wd w)
//   w += delta, or compensated_add(w, c, delta) when c is given (update_compensation.hpp)
#include <cstddef>
#include <cstdint>

namespace asteria {

struct AdamWCoefficients {
  float b1 = 0, b2 = 0, a1 = 0, a2 = 0;
  float step_size = 0;      // lr / (1 - beta1^t)
  float inv_sqrt_bc2 = 0;   // 1 / sqrt(1 - beta2^t)
  float eps = 0;
  float wd = 0;             // lr * weight_decay, 0 for a tensor without decay
};

// In double, each rounded to fp32 once (1 - beta2 in fp32 is 1.3e-5 off at beta2 = 0.999).
AdamWCoefficients adamw_coefficients(double beta1, double beta2, double eps, double lr, double weight_decay,
                                     int64_t step);

// w, c (null: no compensation), m, v, g: n floats each.
void adamw_update(float* w, float* c, float* m, float* v, const float* g, float grad_scale, size_t n,
                  const AdamWCoefficients& k);

namespace cuda {
// The same on device pointers, on the calling thread's current stream (builds with CUDA only).
void adamw_update(float* w, float* c, float* m, float* v, const float* g, float grad_scale, size_t n,
                  const AdamWCoefficients& k);
}  // namespace cuda

}  // namespace asteria
