#pragma once
// The last step of the replicas' gradient all-reduce (Sharding::reduce_over_replicas): the sum
// scaled to the mean over all `world` ranks, x[i] *= 1 / world in fp32 (one rounding: a single
// multiply, never a division per element), one signature per backend so that the CPU's MPI path
// and the GPU's NCCL path round alike.
#include <cstddef>

namespace asteria {

// Host memory, on the calling thread alone (the comm lane, beside the compute lane's team).
void scale_to_mean(float* x, size_t n, int world);

namespace cuda {
// Device memory whose writers have finished, on a stream of the calling thread's own; returns
// when it is done (builds with CUDA only; elsewhere an Error with the reason).
void scale_to_mean(float* x, size_t n, int world);
}  // namespace cuda

}  // namespace asteria
