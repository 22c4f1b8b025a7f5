// The replicas' check (train/replica_check.hpp) under real mpirun: identical tensors pass; one
// bit flipped on the last rank is an Error on every rank naming both ranks and the tensor; ranks
// holding different parts (as sharded ranks do) are compared only with their own part's ranks.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "comm/mpi_communicator.hpp"
#include "train/replica_check.hpp"

using namespace asteria;

namespace {

std::vector<TensorBits> views(const std::vector<std::vector<float>>& data) {
  const char* names[] = {"blocks.0.att_qkv", "blocks.0.mlp_up", "blocks.1.att_qkv"};
  std::vector<TensorBits> out;
  for (size_t i = 0; i < data.size(); ++i) out.push_back({names[i], data[i].data(), data[i].size()});
  return out;
}

}  // namespace

TEST(MpiReplicaCheck, IdenticalReplicasPassAndAFlippedBitNamesItsTensor) {
  auto world = make_mpi_world_communicator();
  world->set_timeout(60);
  const int W = world->size(), me = world->rank();
  std::vector<std::vector<float>> data = {std::vector<float>(1000, 0.5f), std::vector<float>(333, -2.0f),
                                          std::vector<float>(77, 3.0f)};
  EXPECT_NO_THROW(check_replicas_identical(*world, 0, views(data), "step 1"));
  if (W < 2) GTEST_SKIP() << "needs 2 or more ranks";
  if (me == W - 1) {
    uint32_t bits;
    std::memcpy(&bits, &data[1][100], 4);
    bits ^= 1;
    std::memcpy(&data[1][100], &bits, 4);
  }
  try {
    check_replicas_identical(*world, 0, views(data), "step 7");
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string want = "rank " + std::to_string(W - 1) + "'s parameters differ from rank 0's at step 7, first in blocks.0.mlp_up";
    EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
  }
  // Two parts (even and odd ranks) whose data differ between the parts but not within them.
  std::vector<std::vector<float>> part = {std::vector<float>(50 + me % 2, static_cast<float>(me % 2))};
  EXPECT_NO_THROW(check_replicas_identical(*world, me % 2, views(part), "step 9"));
}
