#include "optim/sum_of_squares.hpp"

#include "core/ordered_sum.hpp"

namespace asteria {

double sum_of_squares(const float* x, size_t n) {
  return ordered_sums<1>(n, size_t(1) << 14, true, [x](size_t begin, size_t end) {
    double s = 0;
    for (size_t i = begin; i < end; ++i) s += static_cast<double>(x[i]) * x[i];
    return std::array<double, 1>{s};
  })[0];
}

}  // namespace asteria
