#include "optim/sum_of_squares.hpp"

namespace asteria {

double sum_of_squares(const float* x, size_t n) {
  double s = 0;
#pragma omp parallel for reduction(+ : s) schedule(static)
  for (size_t i = 0; i < n; ++i) s += static_cast<double>(x[i]) * x[i];
  return s;
}

}  // namespace asteria
