// The device's shards (fsdp/device_shards.hpp) as one rank of two, on a backend whose device
// memory the host cannot read (tests/fsdp/device_shards_check.hpp; the same check runs on the
// GPU in tests/cuda/device_shards_cuda_test.cpp, and against the host's Sharding over real
// ranks in tests/mpi/device_shards_test.cpp).
#include <gtest/gtest.h>

#include "../core/scrambled_device_backend.hpp"
#include "device_shards_check.hpp"

using namespace asteria;

TEST(DeviceShards, OneRankOfTwoHoldsTheHostsValuesOnMemoryTheHostCannotRead) {
  test_support::ScrambledDeviceBackend dev;
  test_support::StagedVectorOps ops(dev);
  test_support::check_one_rank_of_two(dev, ops);
  // Every device byte went through the backend's copies.
  EXPECT_GT(dev.to_device_bytes, 0u);
  EXPECT_GT(dev.from_device_bytes, 0u);
}
