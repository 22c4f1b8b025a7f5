#pragma once
// Helpers for finite-difference gradient checks in fp64 (tests only).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace asteria::testing {

// Deterministic uniform(-1, 1) values (xorshift), independent of the library's init.
class TestRng {
 public:
  explicit TestRng(uint64_t seed) : s_(seed * 0x9E3779B97F4A7C15ull + 1) {}
  double uniform() {  // in [-1, 1)
    s_ ^= s_ << 13;
    s_ ^= s_ >> 7;
    s_ ^= s_ << 17;
    return static_cast<double>(s_ >> 11) * 0x1.0p-52 - 1.0;
  }
  std::vector<double> vec(size_t n, double scale = 1.0) {
    std::vector<double> v(n);
    for (auto& x : v) x = scale * uniform();
    return v;
  }

 private:
  uint64_t s_;
};

inline double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); i++) s += a[i] * b[i];
  return s;
}

// Compares analytic[i] with a central difference of f at up to
// max_checks entries of x (all when n is small, else an even spread). The error of an entry is
// |a - fd| / (max(|a|, |fd|) + floor), floor = 1e-4 * max|analytic| (so entries that are ~0
// compared with the rest of the tensor are judged by absolute error). Returns the worst error.
inline double max_gradient_error(const std::function<double()>& f, double* x,
                                 const double* analytic, size_t n, size_t max_checks = 1u << 30,
                                 double h = 1e-3) {
  double amax = 0;
  for (size_t i = 0; i < n; i++) amax = std::max(amax, std::fabs(analytic[i]));
  const double floor = std::max(1e-4 * amax, 1e-13);
  const size_t checks = std::min(n, max_checks);
  double worst = 0;
  for (size_t k = 0; k < checks; k++) {
    const size_t i = checks == n ? k : (k * n) / checks + (k * 7919) % std::max<size_t>(1, n / checks);
    const double saved = x[i];
    auto at = [&](double d) {
      x[i] = saved + d;
      return f();
    };
    // Fourth-order central stencil: truncation error O(h^4), so h can be large enough that
    // rounding in f stays far below the tolerance.
    const double fd = (8 * (at(h) - at(-h)) - (at(2 * h) - at(-2 * h))) / (12 * h);
    x[i] = saved;
    const double err =
        std::fabs(analytic[i] - fd) / (std::max(std::fabs(analytic[i]), std::fabs(fd)) + floor);
    worst = std::max(worst, err);
  }
  return worst;
}

}  // namespace asteria::testing
