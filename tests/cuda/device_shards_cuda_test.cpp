// The device's shards (fsdp/device_shards.hpp) on the GPU as one rank of a sharded plan of two,
// the other rank simulated (tests/fsdp/device_shards_check.hpp): the CUDA backend's copies and
// the shard kernels (rotation by reversals, add, the replicas' mean) bit for bit against the
// host's arithmetic, on a machine with one GPU. Two-GPU runs of the whole sharded training are
// in train_cuda_ranks_test.cpp.
#include <gtest/gtest.h>

#include "core/backend.hpp"
#include "fsdp/shard_vector_ops.hpp"
#include "../fsdp/device_shards_check.hpp"

namespace asteria {
namespace {

TEST(DeviceShardsCuda, OneRankOfTwoHoldsTheHostsValuesBitForBit) {
  std::string why;
  if (!cuda_backend_available(&why)) GTEST_SKIP() << "no GPU: " << why;
  std::unique_ptr<Backend> gpu = make_cuda_backend(0);
  std::unique_ptr<ShardVectorOps> ops = make_cuda_shard_vector_ops();
  test_support::check_one_rank_of_two(*gpu, *ops);
}

}  // namespace
}  // namespace asteria
