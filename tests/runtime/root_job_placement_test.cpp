// Root jobs on the compute lane (runtime.shadow.lane compute): every part of every opened
// refresh runs once, in order, between its opening and its publish step; parts spread over the
// delay so that the batches are short and even.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <stdexcept>
#include <tuple>

#include "../optim/bench_small_blocks.hpp"
#include "optim/preconditioner.hpp"
#include "runtime/root_job_placement.hpp"

using namespace asteria;
using asteria::testing::bench_small_blocks;
using asteria::testing::block;

namespace {

// The optimizer a test case names as optim.name spells it.
OptimizerKind optimizer_named(const std::string& name) {
  for (OptimizerKind k : {OptimizerKind::AdamW, OptimizerKind::Shampoo, OptimizerKind::Soap, OptimizerKind::KlShampoo})
    if (name == to_string(k)) return k;
  throw std::invalid_argument("no optimizer named " + name);
}


// One layer of `n` blocks (their sizes only matter to the stagger), each refresh of `parts`.
RootJobPlacement::PartCosts equal_parts(int n, std::vector<double> parts) {
  return {std::vector<std::vector<double>>(static_cast<size_t>(n), std::move(parts))};
}

// Recomputed from tasks_at: the wall time of each step's batches over one period (steady state),
// tasks handed out largest first to the thread that frees up first; with two batches a step runs
// the tasks of refreshes opened earlier, then those opened at the step.
std::vector<double> batches(const RootJobPlacement& p, int64_t F, int threads) {
  std::vector<double> out;
  std::vector<PlacedTask> tasks;
  for (int64_t step = 3 * F + 1; step <= 4 * F; ++step) {
    p.tasks_at(step, tasks);
    double time = 0;
    for (bool opened_now : {false, true}) {
      if (opened_now && !p.two_batches()) break;
      std::vector<double> busy(static_cast<size_t>(threads), 0.0);
      for (const PlacedTask& t : tasks)
        if (!p.two_batches() || (t.opened == step) == opened_now) *std::min_element(busy.begin(), busy.end()) += t.cost;
      time += *std::max_element(busy.begin(), busy.end());
    }
    out.push_back(time);
  }
  return out;
}

double sum(const std::vector<double>& v) { return std::accumulate(v.begin(), v.end(), 0.0); }
double longest(const std::vector<double>& v) { return *std::max_element(v.begin(), v.end()); }

}  // namespace

TEST(RootJobPlacement, EqualRefreshesPairUpOnTwoThreads) {
  // Four equal one-part refreshes, staggered one per step of F = 4. With D = 1 each runs alone
  // at its opening step (4 per period); with D = 2 two share a step: 2 per period, longest 1.
  const std::vector<std::vector<MatrixBlock>> blocks = {{block(512, 512), block(512, 512), block(512, 512), block(512, 512)}};
  RefreshSchedule s(OptimizerKind::Soap, 4, 1, /*stagger=*/true, blocks);
  const auto costs = equal_parts(4, {1.0});
  RootJobPlacement d1(s, costs, ShadowDelay{1, 0}, 2, false), d2(s, costs, ShadowDelay{2, 0}, 2, false);
  EXPECT_DOUBLE_EQ(sum(batches(d1, 4, 2)), 4.0);
  EXPECT_DOUBLE_EQ(sum(batches(d2, 4, 2)), 2.0);
  EXPECT_DOUBLE_EQ(longest(batches(d2, 4, 2)), 1.0);
  EXPECT_DOUBLE_EQ(d2.period_batches(), 2.0);
  EXPECT_DOUBLE_EQ(d2.longest_batch(), 1.0);
  // One thread: nothing to pair.
  RootJobPlacement one(s, costs, ShadowDelay{2, 0}, 1, false);
  EXPECT_DOUBLE_EQ(sum(batches(one, 4, 1)), 4.0);
  // Two batches (a step with gradient reductions): a refresh at lag 0 runs in the step's second
  // batch, which no refresh opened earlier shares, so D = 2 pairs none; D = 3 pairs those at
  // lags 1 and 2.
  RootJobPlacement split2(s, costs, ShadowDelay{2, 0}, 2, true), split3(s, costs, ShadowDelay{3, 0}, 2, true);
  EXPECT_DOUBLE_EQ(sum(batches(split2, 4, 2)), 4.0);
  EXPECT_DOUBLE_EQ(split2.period_batches(), 4.0);
  EXPECT_DOUBLE_EQ(sum(batches(split3, 4, 2)), 2.0);
  EXPECT_DOUBLE_EQ(longest(batches(split3, 4, 2)), 1.0);
  EXPECT_DOUBLE_EQ(split3.period_batches(), 2.0);
}

TEST(RootJobPlacement, PartsOfOneRefreshSpreadOverTheDelay) {
  // One block, F = 2, a refresh of two equal parts on one thread: with D = 1 both parts run at
  // the opening step (batches 2, 0); with D = 2 the second part runs a step later (1, 1).
  const std::vector<std::vector<MatrixBlock>> blocks = {{block(64, 64)}};
  RefreshSchedule s(OptimizerKind::Soap, 2, 1, false, blocks);
  const auto costs = equal_parts(1, {1.0, 1.0});
  RootJobPlacement d1(s, costs, ShadowDelay{1, 0}, 1, false), d2(s, costs, ShadowDelay{2, 0}, 1, false);
  EXPECT_EQ(d1.lag(0, 0, 1), 0);
  EXPECT_DOUBLE_EQ(longest(batches(d1, 2, 1)), 2.0);
  EXPECT_EQ(d2.lag(0, 0, 0), 0);
  EXPECT_EQ(d2.lag(0, 0, 1), 1);
  EXPECT_DOUBLE_EQ(longest(batches(d2, 2, 1)), 1.0);
  EXPECT_DOUBLE_EQ(sum(batches(d2, 2, 1)), 2.0);
}

TEST(RootJobPlacement, EveryPartRunsOnceInOrderBeforeItsPublishStep) {
  // bench-small's blocks, 4 layers, SOAP and Shampoo parts, F = 10, D = 3 and 4, and a
  // synchronous warm-up of 15 steps whose refreshes are not the placement's.
  const auto blocks = bench_small_blocks(4);
  for (const char* algo : {"soap", "shampoo"})
    for (int64_t D : {3, 4})
      for (bool stagger : {false, true})
        for (bool two_batches : {false, true}) {
        RefreshSchedule s(optimizer_named(algo), 10, 1, stagger, blocks);
        const auto costs = refresh_part_costs(optimizer_named(algo), blocks);
        const ShadowDelay delay{D, 15};
        RootJobPlacement p(s, costs, delay, 2, two_batches);
        std::map<std::tuple<int, int, int64_t>, std::vector<int>> parts_run;   // in the order they ran
        std::vector<PlacedTask> tasks;
        for (int64_t step = 1; step <= 80; ++step) {
          p.tasks_at(step, tasks);
          for (size_t i = 0; i < tasks.size(); ++i) {
            const PlacedTask& t = tasks[i];
            EXPECT_TRUE(s.due(t.layer, t.block, t.opened));
            EXPECT_GT(t.opened, delay.sync_steps);
            EXPECT_GE(step, t.opened);
            EXPECT_LT(step, t.opened + D);  // done before the publish step
            ASSERT_LT(t.begin, t.end);
            for (int k = t.begin; k < t.end; ++k) {
              EXPECT_EQ(step - t.opened, p.lag(t.layer, t.block, k));
              parts_run[{t.layer, t.block, t.opened}].push_back(k);
            }
            if (i > 0) {
              EXPECT_GE(tasks[i - 1].cost, t.cost);
            }
          }
        }
        for (int l = 0; l < 4; ++l)
          for (int b = 0; b < 5; ++b)
            for (int64_t t = delay.sync_steps + 1; t <= 70; ++t)
              if (s.due(l, b, t)) {
                std::vector<int> all(costs[l][b].size());
                std::iota(all.begin(), all.end(), 0);
                EXPECT_EQ((parts_run[{l, b, t}]), all) << algo << " " << l << " " << b << " opened " << t;
              }
        for (const auto& [key, parts] : parts_run) {   // (later openings finish after step 80)
          if (std::get<2>(key) <= 80 - D) {
            EXPECT_EQ(parts.size(), costs[std::get<0>(key)][std::get<1>(key)].size());
          }
        }
      }
}

TEST(RootJobPlacement, PartsMakeBenchSmallsBatchesShortAndEven) {
  // With the cost-balanced stagger each step of bench-small opens about one 1024 x 256 refresh
  // (cost B). Whole refreshes at lag 0 leave a thread idle beside each; whole refreshes over
  // lags <= 2 pair them, but then steps alternate between two large refreshes and small ones.
  // In parts over the same lags the batches approach the even spread: total / (2 F) each.
  // With two batches a step's lag-0 tasks cannot pair with the others: a little further.
  const auto blocks = bench_small_blocks(4);
  RefreshSchedule s(OptimizerKind::Soap, 10, 1, true, blocks);
  const auto parts = refresh_part_costs(OptimizerKind::Soap, blocks);
  RootJobPlacement::PartCosts whole;
  double total = 0;
  for (const auto& layer : parts) {
    whole.emplace_back();
    for (const auto& p : layer) {
      whole.back().push_back({std::accumulate(p.begin(), p.end(), 0.0)});
      total += whole.back().back()[0];
    }
  }
  const double B = refresh_cost(block(1024, 256)), even = total / 2 / 10;
  for (bool two : {false, true}) {
    RootJobPlacement lag0(s, whole, ShadowDelay{1, 0}, 2, two), paired(s, whole, ShadowDelay{3, 0}, 2, two),
        split(s, parts, ShadowDelay{3, 0}, 2, two);
    const auto b0 = batches(lag0, 10, 2), bp = batches(paired, 10, 2), bs = batches(split, 10, 2);
    std::printf("%s batch(es), in B per period / longest step: lag 0 %.2f / %.2f, whole over lags <= 2 %.2f / %.2f, "
                "parts %.2f / %.2f; even spread %.2f / %.2f\n",
                two ? "two" : "one", sum(b0) / B, longest(b0) / B, sum(bp) / B, longest(bp) / B, sum(bs) / B,
                longest(bs) / B, 10 * even / B, even / B);
    EXPECT_DOUBLE_EQ(sum(bs), split.period_batches());
    EXPECT_DOUBLE_EQ(longest(bs), split.longest_batch());
    EXPECT_GE(longest(b0), B);
    EXPECT_GE(longest(bp), B);                // a whole large refresh is never shorter than B
    EXPECT_LE(sum(bs), sum(bp) * 1.0001);     // parts: the period no longer than paired
    EXPECT_GE(sum(bs), 10 * even * 0.9999);
    if (!two) {
      EXPECT_LT(longest(bs), 0.85 * B);       // and no step carries a whole one
      EXPECT_LE(longest(bs), 1.25 * even);
    }
  }
}
