#include "optim/newton_schulz.hpp"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

namespace asteria {

size_t newton_schulz_work(int rows, int cols) {
  const size_t r = static_cast<size_t>(std::min(rows, cols));
  return 2 * r * r + static_cast<size_t>(rows) * cols;
}

double newton_schulz_flops(int rows, int cols, int steps) {
  const double r = std::min(rows, cols), s = std::max(rows, cols);
  return steps * (4 * r * r * s + 2 * r * r * r);
}

void newton_schulz5(float* x, int rows, int cols, int steps, float* work) {
  const size_t n = static_cast<size_t>(rows) * cols;
  double sq = 0;
  for (size_t i = 0; i < n; ++i) sq += static_cast<double>(x[i]) * x[i];
  const float inv = static_cast<float>(1.0 / (std::sqrt(sq) + 1e-7));
  for (size_t i = 0; i < n; ++i) x[i] *= inv;
  const bool tall = rows > cols;
  const int r = tall ? cols : rows;
  float* A = work;
  float* B = A + static_cast<size_t>(r) * r;
  float* y = B + static_cast<size_t>(r) * r;   // the next X
  for (int it = 0; it < steps; ++it) {
    // A = X X^T (wide) or X^T X (tall): r x r.
    if (tall)
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, r, r, rows, 1.0f, x, cols, x, cols, 0.0f, A, r);
    else
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, r, r, cols, 1.0f, x, cols, x, cols, 0.0f, A, r);
    // B = b A + c A A
    std::memcpy(B, A, sizeof(float) * r * r);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, r, r, r, kNewtonSchulzC, A, r, A, r, kNewtonSchulzB, B, r);
    // X = a X + B X (wide) or a X + X B (tall; B is symmetric).
    std::memcpy(y, x, sizeof(float) * n);
    if (tall)
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, cols, cols, 1.0f, x, cols, B, r, kNewtonSchulzA, y, cols);
    else
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, cols, rows, 1.0f, B, r, x, cols, kNewtonSchulzA, y, cols);
    std::memcpy(x, y, sizeof(float) * n);
  }
}

}  // namespace asteria
