#include "optim/adamw_update.hpp"

#include <cmath>

#include "optim/update_compensation.hpp"

namespace asteria {

AdamWCoefficients adamw_coefficients(double beta1, double beta2, double eps, double lr, double weight_decay,
                                     int64_t step) {
  AdamWCoefficients k;
  k.b1 = static_cast<float>(beta1);
  k.b2 = static_cast<float>(beta2);
  k.a1 = static_cast<float>(1.0 - beta1);
  k.a2 = static_cast<float>(1.0 - beta2);
  const double bc1 = 1.0 - std::pow(beta1, static_cast<double>(step));
  const double bc2 = 1.0 - std::pow(beta2, static_cast<double>(step));
  k.step_size = static_cast<float>(lr / bc1);
  k.inv_sqrt_bc2 = static_cast<float>(1.0 / std::sqrt(bc2));
  k.eps = static_cast<float>(eps);
  k.wd = static_cast<float>(lr * weight_decay);
  return k;
}

namespace {

// One element's moments (m, v updated) and its update delta, in adamw_update.hpp's operations.
inline float adamw_delta(float& m, float& v, float g, float w, float grad_scale, const AdamWCoefficients& k) {
  const float gi = g * grad_scale;
  m = k.b1 * m + k.a1 * gi;
  v = k.b2 * v + k.a2 * gi * gi;
  return -(k.step_size * m / (std::sqrt(v) * k.inv_sqrt_bc2 + k.eps) + k.wd * w);
}

}  // namespace

// The loops must vectorize (the update is memory-bound, and scalar it ran at a third of the
// bandwidth): restrict pointers and a local copy of the coefficients (reached through a lambda's
// captures GCC kept the loop scalar), and sqrt without errno (src/CMakeLists.txt). Vector and
// scalar sqrt and division are both IEEE, so the bits are the same.
void adamw_update(float* __restrict w, float* __restrict c, float* __restrict m, float* __restrict v,
                  const float* __restrict g, float grad_scale, size_t n, const AdamWCoefficients& coefficients) {
  const AdamWCoefficients k = coefficients;
  if (c) {
#pragma omp parallel for simd schedule(static) if (n > 4096)
    for (size_t i = 0; i < n; ++i) compensated_add(w[i], c[i], adamw_delta(m[i], v[i], g[i], w[i], grad_scale, k));
  } else {
#pragma omp parallel for simd schedule(static) if (n > 4096)
    for (size_t i = 0; i < n; ++i) w[i] += adamw_delta(m[i], v[i], g[i], w[i], grad_scale, k);
  }
}

}  // namespace asteria
