#pragma once
// sum_i x[i]^2 in double: a layer's share of the gradient norm (the trainer's grad_norm op), one
// signature per backend like adamw_update.hpp. Both are deterministic for a given n (fixed
// partition, fixed order, whatever the number of threads: core/ordered_sum.hpp), not bit-equal
// to each other.
#include <cstddef>

namespace asteria {

double sum_of_squares(const float* x, size_t n);

namespace cuda {
// The same on a device pointer, on the calling thread's current stream; returns once the sum is
// on the host (builds with CUDA only).
double sum_of_squares(const float* x, size_t n);
}  // namespace cuda

}  // namespace asteria
