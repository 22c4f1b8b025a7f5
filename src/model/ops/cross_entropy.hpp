#pragma once
// Softmax cross-entropy with optional z-loss, fused with its backward: one pass over the logits
// computes the loss and overwrites the logits with dL/dlogits, so the [N, V] logits are read
// from memory once. Loss (per the model contract):
//   L = mean_n (lse_n - logit[n, target_n]) + z_loss * mean_n lse_n^2,  lse_n = logsumexp(row n)
//   dL/dlogit[n, j] = (p_nj - [j == target_n] + 2 z_loss lse_n p_nj) / N

#include <cstdint>

namespace asteria::ops {

struct CrossEntropyResult {
  double ce = 0;      // mean cross-entropy
  double z = 0;       // mean lse^2 (the z-loss term before its coefficient)
};

// logits [N, V] in, dL/dlogits [N, V] out (in place). targets [N], each in [0, V).
// mean_over: the rows the means and the gradient are over (0: N); a chunk of rows of a larger
// batch passes the batch's row count, so that its results are its share of the batch's.
template <class T>
CrossEntropyResult cross_entropy_fused(T* logits, const int32_t* targets, int N, int V,
                                       double z_loss, int mean_over = 0);

// The CUDA backend's op (ops/cuda/cross_entropy.cu): the same contract on device pointers, queued on
// the calling thread's current stream (core/cuda/cuda_context.hpp). Defined for float in builds
// with the CUDA backend.
namespace cuda {

template <class T>
CrossEntropyResult cross_entropy_fused(T* logits, const int32_t* targets, int N, int V,
                                       double z_loss, int mean_over = 0);

}  // namespace cuda

}  // namespace asteria::ops
