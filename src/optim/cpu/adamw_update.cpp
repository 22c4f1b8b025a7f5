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

void adamw_update(float* w, float* c, float* m, float* v, const float* g, float grad_scale, size_t n,
                  const AdamWCoefficients& k) {
  auto moments = [&](size_t i) {
    const float gi = g[i] * grad_scale;
    const float mi = k.b1 * m[i] + k.a1 * gi;
    const float vi = k.b2 * v[i] + k.a2 * gi * gi;
    m[i] = mi;
    v[i] = vi;
    return -(k.step_size * mi / (std::sqrt(vi) * k.inv_sqrt_bc2 + k.eps) + k.wd * w[i]);
  };
  if (c) {
#pragma omp parallel for simd schedule(static) if (n > 4096)
    for (size_t i = 0; i < n; ++i) compensated_add(w[i], c[i], moments(i));
  } else {
#pragma omp parallel for simd schedule(static) if (n > 4096)
    for (size_t i = 0; i < n; ++i) w[i] += moments(i);
  }
}

}  // namespace asteria
