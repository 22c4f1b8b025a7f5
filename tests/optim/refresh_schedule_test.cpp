// The refresh schedule: the reference schedule, one refresh per block per period with stagger,
// and staggered offsets balanced by refresh cost (hand-derived loads for bench-small's blocks).
#include <gtest/gtest.h>

#include <algorithm>

#include "bench_small_blocks.hpp"
#include "optim/refresh_schedule.hpp"

using namespace asteria;
using asteria::testing::bench_small_blocks;
using asteria::testing::block;

namespace {

// Cost of the blocks refreshing at each slot of the period.
std::vector<double> slot_loads(const RefreshSchedule& s, const std::vector<std::vector<MatrixBlock>>& blocks) {
  std::vector<double> load(static_cast<size_t>(s.frequency()), 0.0);
  for (size_t l = 0; l < blocks.size(); ++l)
    for (size_t b = 0; b < blocks[l].size(); ++b)
      load[static_cast<size_t>(s.offset(static_cast<int>(l), static_cast<int>(b)))] += refresh_cost(blocks[l][b]);
  return load;
}

}  // namespace

TEST(RefreshSchedule, ReferenceScheduleRefreshesEveryBlockTogether) {
  const auto blocks = bench_small_blocks(2);
  RefreshSchedule soap(OptimizerKind::Soap, 10, 1, false, blocks);
  RefreshSchedule shampoo(OptimizerKind::Shampoo, 10, 5, false, blocks);
  for (int64_t step = 1; step <= 40; ++step)
    for (int l = 0; l < 2; ++l)
      for (int b = 0; b < 5; ++b) {
        // SOAP counts from its second call; Shampoo refreshes at start_preconditioning_step and
        // then at the multiples of F after it, as Distributed Shampoo does.
        EXPECT_EQ(soap.due(l, b, step), step >= 2 && (step - 1) % 10 == 0) << step;
        EXPECT_EQ(shampoo.due(l, b, step), step == 5 || (step > 5 && step % 10 == 0)) << step;
      }
}

TEST(RefreshSchedule, ShampooStartsAtItsStartStepWithStaggerToo) {
  // Every block gets its first roots at S (the switch from grafting), then once per period at
  // its phase.
  const auto blocks = bench_small_blocks(2);
  RefreshSchedule s(OptimizerKind::Shampoo, 4, 3, true, blocks);
  for (int l = 0; l < 2; ++l)
    for (int b = 0; b < 5; ++b) {
      std::vector<int64_t> steps;
      for (int64_t step = 1; step <= 20; ++step)
        if (s.due(l, b, step)) steps.push_back(step);
      ASSERT_FALSE(steps.empty());
      EXPECT_EQ(steps[0], 3);
      for (size_t i = 1; i < steps.size(); ++i) {
        EXPECT_EQ(steps[i] % 4, s.phase(l, b));
        if (i > 1) {
          EXPECT_EQ(steps[i] - steps[i - 1], 4);
        }
      }
    }
}

TEST(RefreshSchedule, StaggerRefreshesEachBlockOncePerPeriod) {
  const auto blocks = bench_small_blocks(4);
  RefreshSchedule s(OptimizerKind::KlShampoo, 10, 1, true, blocks);
  for (int l = 0; l < 4; ++l)
    for (int b = 0; b < 5; ++b) {
      std::vector<int64_t> steps;
      for (int64_t step = 1; step <= 41; ++step)
        if (s.due(l, b, step)) steps.push_back(step);
      ASSERT_EQ(steps.size(), 4u) << l << "," << b;
      for (size_t i = 1; i < steps.size(); ++i) EXPECT_EQ(steps[i] - steps[i - 1], 10);
    }
}

TEST(RefreshSchedule, StaggerBalancesRefreshCost) {
  // 12 blocks of cost B (1024 + 256), 4 of Q (768 + 256), 4 of S (256 + 256) over 10 steps.
  // Largest first into the least loaded step gives two steps of 2B, four of B+Q and four of
  // B+S; the order heaviest, lightest, ... keeps the two 2B steps apart. Counting blocks
  // instead (offset = block index mod 10) puts 2B on six steps, three of them in a row.
  const auto blocks = bench_small_blocks(4);
  const double B = refresh_cost(block(1024, 256)), Q = refresh_cost(block(768, 256)),
               S = refresh_cost(block(256, 256));
  RefreshSchedule s(OptimizerKind::Soap, 10, 1, true, blocks);
  std::vector<double> load = slot_loads(s, blocks);
  std::vector<double> sorted = load;
  std::sort(sorted.begin(), sorted.end());
  const std::vector<double> expected = {B + S, B + S, B + S, B + S, B + Q, B + Q, B + Q, B + Q, 2 * B, 2 * B};
  EXPECT_EQ(sorted, expected);
  for (size_t k = 0; k < load.size(); ++k) {
    const double pair = load[k] + load[(k + 1) % load.size()];
    EXPECT_LE(pair, 3 * B + Q) << "slots " << k << " and " << (k + 1) % load.size();
  }
}

TEST(RefreshSchedule, FewerBlocksThanStepsGetStepsOfTheirOwn) {
  const std::vector<std::vector<MatrixBlock>> blocks = {{block(64, 32), block(128, 128)}, {block(32, 32)}};
  RefreshSchedule s(OptimizerKind::Shampoo, 8, 1, true, blocks);
  EXPECT_NE(s.offset(0, 0), s.offset(0, 1));
  EXPECT_NE(s.offset(0, 0), s.offset(1, 0));
  EXPECT_NE(s.offset(0, 1), s.offset(1, 0));
}
