// Which GPU each rank of a launch takes (train/rank_device.hpp): CUDA_VISIBLE_DEVICES narrowed
// to one GPU per rank from what the launcher left in it.
#include <gtest/gtest.h>

#include <string>

#include "core/error.hpp"
#include "train/rank_device.hpp"

namespace asteria {
namespace {

TEST(RankDevice, UnsetGivesEachLocalRankTheDeviceOfItsNumber) {
  EXPECT_EQ(rank_visible_devices(0, 4, nullptr), "0");
  EXPECT_EQ(rank_visible_devices(3, 4, nullptr), "3");
  EXPECT_EQ(rank_visible_devices(1, 2, ""), "1");
}

TEST(RankDevice, AListGivesEachLocalRankItsEntry) {
  EXPECT_EQ(rank_visible_devices(0, 2, "4,5,6,7"), "4");
  EXPECT_EQ(rank_visible_devices(1, 2, "4,5,6,7"), "5");
  EXPECT_EQ(rank_visible_devices(2, 3, "GPU-aa,GPU-bb,GPU-cc"), "GPU-cc");   // UUIDs pass through
}

TEST(RankDevice, OneEntryIsTheGpuTheLauncherBoundToThisRank) {
  EXPECT_EQ(rank_visible_devices(0, 4, "2"), "2");
  EXPECT_EQ(rank_visible_devices(3, 4, "2"), "2");
}

TEST(RankDevice, FewerGpusThanRanksIsRefusedWithTheCounts) {
  try {
    rank_visible_devices(0, 4, "0,1");
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("CUDA_VISIBLE_DEVICES='0,1' lists 2 GPU(s) for the 4 ranks on this node"), std::string::npos) << what;
  }
}

}  // namespace
}  // namespace asteria
