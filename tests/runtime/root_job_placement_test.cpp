// Root jobs on the compute lane (runtime.shadow.lane compute): every opened refresh runs once,
// between its opening and its publish step; equal jobs pair up on the threads of a step.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <tuple>

#include "../optim/bench_small_blocks.hpp"
#include "runtime/root_job_placement.hpp"

using namespace asteria;
using asteria::testing::bench_small_blocks;
using asteria::testing::block;

namespace {

// The wall time of a step's batch on `threads` threads, the jobs handed out largest first to
// the thread that frees up first (what dynamic scheduling does with the sorted batch).
double batch_time(const std::vector<PlacedJob>& jobs, const std::vector<std::vector<MatrixBlock>>& blocks,
                  int threads) {
  std::vector<double> busy(static_cast<size_t>(threads), 0.0);
  for (const PlacedJob& j : jobs) *std::min_element(busy.begin(), busy.end()) += refresh_cost(blocks[j.layer][j.block]);
  return *std::max_element(busy.begin(), busy.end());
}

double period_time(const RootJobPlacement& p, const std::vector<std::vector<MatrixBlock>>& blocks, int64_t F,
                   int threads) {
  std::vector<PlacedJob> jobs;
  double total = 0;
  for (int64_t step = 3 * F + 1; step <= 4 * F; ++step) {
    p.jobs_at(step, jobs);
    total += batch_time(jobs, blocks, threads);
  }
  return total;
}

}  // namespace

TEST(RootJobPlacement, EqualJobsPairUpOnTwoThreads) {
  // Four equal blocks, staggered one per step of F = 4. With D = 1 each runs alone at its
  // opening step (4 job-times per period); with D = 2 two share a step: 2 job-times.
  const std::vector<std::vector<MatrixBlock>> blocks = {{block(512, 512), block(512, 512), block(512, 512), block(512, 512)}};
  const double c = refresh_cost(blocks[0][0]);
  RefreshSchedule s("soap", 4, 1, /*stagger=*/true, blocks);
  RootJobPlacement d1(s, blocks, ShadowDelay{1, 0}, 2);
  RootJobPlacement d2(s, blocks, ShadowDelay{2, 0}, 2);
  EXPECT_DOUBLE_EQ(period_time(d1, blocks, 4, 2), 4 * c);
  EXPECT_DOUBLE_EQ(period_time(d2, blocks, 4, 2), 2 * c);
  // One thread: nothing to pair.
  RootJobPlacement one(s, blocks, ShadowDelay{2, 0}, 1);
  EXPECT_DOUBLE_EQ(period_time(one, blocks, 4, 1), 4 * c);
}

TEST(RootJobPlacement, EveryRefreshRunsOnceBeforeItsPublishStep) {
  // bench-small's blocks, 4 layers, SOAP F = 10, D = 3, and a synchronous warm-up of 15 steps
  // whose refreshes are not the placement's.
  const auto blocks = bench_small_blocks(4);
  for (bool stagger : {false, true}) {
    RefreshSchedule s("soap", 10, 1, stagger, blocks);
    const ShadowDelay delay{3, 15};
    RootJobPlacement p(s, blocks, delay, 2);
    std::map<std::tuple<int, int, int64_t>, int> runs;
    std::vector<PlacedJob> jobs;
    for (int64_t step = 1; step <= 80; ++step) {
      p.jobs_at(step, jobs);
      for (size_t i = 0; i < jobs.size(); ++i) {
        const PlacedJob& j = jobs[i];
        EXPECT_TRUE(s.due(j.layer, j.block, j.opened));
        EXPECT_GT(j.opened, delay.sync_steps);
        EXPECT_GE(step, j.opened);
        EXPECT_LT(step, j.opened + delay.delay);  // done before the publish step
        EXPECT_EQ(step - j.opened, p.lag(j.layer, j.block));
        if (i > 0) EXPECT_GE(refresh_cost(blocks[jobs[i - 1].layer][jobs[i - 1].block]), refresh_cost(blocks[j.layer][j.block]));
        ++runs[{j.layer, j.block, j.opened}];
      }
    }
    for (int l = 0; l < 4; ++l)
      for (int b = 0; b < 5; ++b)
        for (int64_t t = delay.sync_steps + 1; t <= 70; ++t)
          if (s.due(l, b, t)) EXPECT_EQ((runs[{l, b, t}]), 1) << l << " " << b << " " << t;
    for (const auto& [key, n] : runs) EXPECT_EQ(n, 1);
  }
}

TEST(RootJobPlacement, LagsShortenBenchSmallsBatches) {
  // With the cost-balanced stagger every step of bench-small opens about one 1024 x 256 refresh
  // (B), so without lags each step's batch lasts at least B while the other thread has less to
  // do. Lags of up to D - 1 = 2 steps pair the large jobs.
  const auto blocks = bench_small_blocks(4);
  RefreshSchedule s("soap", 10, 1, true, blocks);
  RootJobPlacement d1(s, blocks, ShadowDelay{1, 0}, 2);
  RootJobPlacement d3(s, blocks, ShadowDelay{3, 0}, 2);
  const double B = refresh_cost(block(1024, 256));
  double total = 0;
  for (const auto& layer : blocks)
    for (const MatrixBlock& b : layer) total += refresh_cost(b);
  const double unpaired = period_time(d1, blocks, 10, 2), paired = period_time(d3, blocks, 10, 2);
  std::printf("period time: lag 0 %.2f B, lags <= 2 %.2f B, lower bound %.2f B\n", unpaired / B, paired / B,
              total / 2 / B);
  EXPECT_GE(unpaired, 10 * B);
  EXPECT_LT(paired, 0.8 * unpaired);
  EXPECT_GE(paired, total / 2);
}
