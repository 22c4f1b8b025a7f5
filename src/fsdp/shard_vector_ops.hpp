#pragma once
// The element work of sharded training on shard memory besides its collectives
// (fsdp/device_shards.hpp), one implementation per memory: the CUDA backend's kernels
// (make_cuda_shard_vector_ops), or a test's stand-in for memory the host cannot read.
//
// Contract: the pointers are the backend's Device memory, every writer of which has finished
// (the callers waited for the collective or the op that wrote it); each call returns when its
// work is done. add, rotate_left and scale_to_mean run on the comm lane (a stream of the
// calling thread's own), sum_of_squares on the compute lane (the calling thread's current
// stream). Each rounds exactly as its host twin does (x + y in fp32, one fp32 multiply by
// 1 / world, the sum in double over a fixed partition), so that a device run's shards hold the
// CPU run's bits for the same inputs, except sum_of_squares (deterministic, not bit-equal to
// the host's: optim/sum_of_squares.hpp).
#include <cstddef>
#include <memory>

namespace asteria {

class ShardVectorOps {
 public:
  virtual ~ShardVectorOps() = default;
  virtual void add(float* acc, const float* x, size_t n) = 0;              // acc[i] += x[i]
  virtual void rotate_left(float* x, size_t n, size_t first) = 0;          // std::rotate(x, x + first, x + n)
  virtual void scale_to_mean(float* x, size_t n, int world) = 0;           // comm/replica_mean.hpp
  virtual double sum_of_squares(const float* x, size_t n) = 0;             // optim/sum_of_squares.hpp
};

// The CUDA backend's (builds with CUDA only; elsewhere an Error with the reason).
std::unique_ptr<ShardVectorOps> make_cuda_shard_vector_ops();

}  // namespace asteria
