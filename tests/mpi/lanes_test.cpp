// Several threads calling MPI at once, each on a communicator of its own (communicator.hpp
// "Threads"), as the compute lane, the comm lane and the coherence protocol do: under
// MPI_THREAD_MULTIPLE every collective meets its own on the other ranks, whatever order the
// threads reach them in on each rank; and the coherence protocol's syncs on its duplicate go
// through while another thread runs collectives on the communicator it was made from.
#include <gtest/gtest.h>
#include <mpi.h>

#include <chrono>
#include <cmath>
#include <thread>
#include <vector>

#include "comm/mpi_communicator.hpp"
#include "runtime/coherence.hpp"

using namespace asteria;

TEST(MpiLanes, TheProcessRunsAtThreadMultiple) {
  int provided = 0;
  MPI_Query_thread(&provided);
  EXPECT_EQ(provided, MPI_THREAD_MULTIPLE);
}

TEST(MpiLanes, ThreadsOnDuplicatesMeetTheirOwnCollectivesInAnyOrder) {
  auto world = make_mpi_world_communicator();
  world->set_timeout(60);
  const int W = world->size(), me = world->rank();
  auto a = world->duplicate(), b = world->duplicate();
  EXPECT_EQ(a->size(), W);
  EXPECT_EQ(a->rank(), me);
  // Lane a sums 1s, lane b sums the rank; odd ranks start lane b first, after a pause, so the
  // two lanes' collectives start in opposite orders on neighbouring ranks.
  constexpr int kRounds = 50;
  std::vector<double> got_a(kRounds), got_b(kRounds);
  auto lane = [&](Communicator& c, std::vector<double>& got, double mine, int delay_ms) {
    std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
    for (int i = 0; i < kRounds; ++i) {
      std::vector<double> v(64 + i, mine);
      Request r = c.all_reduce(v.data(), v.size(), "lane round " + std::to_string(i));
      c.wait(r);
      got[i] = v.back();
    }
  };
  std::thread ta(lane, std::ref(*a), std::ref(got_a), 1.0, me % 2 ? 20 : 0);
  std::thread tb(lane, std::ref(*b), std::ref(got_b), static_cast<double>(me), me % 2 ? 0 : 20);
  ta.join();
  tb.join();
  for (int i = 0; i < kRounds; ++i) {
    EXPECT_EQ(got_a[i], W);
    EXPECT_EQ(got_b[i], W * (W - 1) / 2.0);
  }
}

TEST(MpiLanes, CoherenceSyncsBesideAnotherThreadsCollectivesOnTheSameGroup) {
  auto world = make_mpi_world_communicator();
  world->set_timeout(60);
  const int W = world->size();
  if (W < 2) GTEST_SKIP() << "needs 2 or more ranks";
  MatrixBlock blk;
  blk.rows = 6;
  blk.cols = 5;
  blk.name = "lanes.block";
  const std::vector<std::vector<MatrixBlock>> blocks = {{blk, blk, blk}};
  Coherence coh(CoherenceRule{1, 0}, /*hierarchical=*/false, *world, world->rank(), blocks);
  std::thread other([&] {
    for (int i = 0; i < 40; ++i) {
      double x = 1;
      Request r = world->all_reduce(&x, 1, "the other lane's all_reduce");
      world->wait(r);
      EXPECT_EQ(x, W);
    }
  });
  for (int round = 1; round <= 20; ++round)
    for (int b = 0; b < 3; ++b) {
      RefreshJob truth;
      truth.rows = blk.rows;
      truth.cols = blk.cols;
      for (int i = 0; i < 36; ++i) truth.left_root.push_back(std::sin(round + b + 0.3 * i));
      for (int i = 0; i < 25; ++i) truth.right_root.push_back(std::cos(round - b + 0.7 * i));
      const bool owner = coh.owns(0, b);
      RefreshJob job = owner ? truth : RefreshJob{};
      ASSERT_TRUE(coh.sync(0, b, round, job));
      ASSERT_EQ(job.left_root.size(), truth.left_root.size());
      // The replicas receive the owner's version in fp32 (what the install keeps).
      for (size_t i = 0; i < truth.left_root.size(); ++i)
        EXPECT_EQ(job.left_root[i], owner ? truth.left_root[i] : static_cast<float>(truth.left_root[i]));
    }
  other.join();
}
