#include "model/ops/cross_entropy.hpp"

#include <array>
#include <cmath>
#include <cstddef>

#include "core/ordered_sum.hpp"
#include "model/ops/fast_exp.hpp"
#include "model/ops/parallel.hpp"

namespace asteria::ops {

template <class T>
CrossEntropyResult cross_entropy_fused(T* logits, const int32_t* targets, int N, int V,
                                       double z_loss, int mean_over) {
  if (mean_over == 0) mean_over = N;
  const T inv_n = T(1) / static_cast<T>(mean_over);
  // The loss sums in double over rows, in an order that does not depend on the threads.
  const std::array<double, 2> sums = ordered_sums<2>(N, 16, worth_parallel(size_t(N) * V * 4), [&](size_t begin, size_t end) {
    double ce_sum = 0, z_sum = 0;
    for (size_t n = begin; n < end; n++) {
      T* row = logits + n * V;  // [V]
      const int target = targets[n];
      T mx = row[0];
#pragma omp simd reduction(max : mx)
      for (int j = 1; j < V; j++) mx = row[j] > mx ? row[j] : mx;
      const T target_logit = row[target];
      T sum = 0;
#pragma omp simd reduction(+ : sum)
      for (int j = 0; j < V; j++) {
        const T e = fast_exp(row[j] - mx);
        row[j] = e;
        sum += e;
      }
      const T lse = mx + std::log(sum);
      // (max - target) + log(sum) rather than lse - target: no cancellation of two large numbers.
      ce_sum += static_cast<double>(mx - target_logit) + std::log(static_cast<double>(sum));
      z_sum += static_cast<double>(lse) * static_cast<double>(lse);
      // p = e / sum;  grad = p * (1 + 2 z lse) / N, minus 1/N at the target.
      const T k = (T(1) + T(2 * z_loss) * lse) * inv_n / sum;
#pragma omp simd
      for (int j = 0; j < V; j++) row[j] *= k;
      row[target] -= inv_n;
    }
    return std::array<double, 2>{ce_sum, z_sum};
  });
  const double ce_sum = sums[0], z_sum = sums[1];
  return {ce_sum / mean_over, z_sum / mean_over};
}

template CrossEntropyResult cross_entropy_fused<float>(float*, const int32_t*, int, int, double, int);
template CrossEntropyResult cross_entropy_fused<double>(double*, const int32_t*, int, int, double, int);

}  // namespace asteria::ops
