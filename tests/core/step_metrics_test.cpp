// StepMetrics: each kind of value combined over the ranks as its contract says, the record's
// nested keys, and misuse named. Two ranks are simulated: rank 0's collector is reduced with a
// sum that adds what rank 1 would have put in the same slots.
#include <gtest/gtest.h>

#include <vector>

#include "core/error.hpp"
#include "core/step_metrics.hpp"

namespace asteria {
namespace {

TEST(StepMetrics, CombinesEachKindOverTheRanks) {
  StepMetrics m(/*rank=*/0, /*world=*/2);
  m.sum("loss_sum", 1.5, /*written=*/false);
  m.per_rank("peak_rss_bytes", 10);
  m.max("slowest_s", 2);
  m.sum("coherence_bytes_inter", 100);
  m.per_rank("comm_bytes_by_rank/replicas", 7);
  m.local("tier_bytes/host", 42);
  m.local("step", 3);
  // Rank 1's values in rank 0's layout: sum 2.5 | per_rank [0, 20] | max [0, 5] | sum 300 | [0, 9].
  const std::vector<double> other = {2.5, 0, 20, 0, 5, 300, 0, 9};
  m.reduce([&](double* data, size_t count) {
    ASSERT_EQ(count, other.size());
    for (size_t i = 0; i < count; ++i) data[i] += other[i];
  });
  EXPECT_EQ(m.total("loss_sum"), 4.0);
  EXPECT_EQ(m.by_rank("peak_rss_bytes"), (std::vector<double>{10, 20}));
  EXPECT_EQ(m.total("slowest_s"), 5.0);
  const nlohmann::json rec = m.record();
  EXPECT_FALSE(rec.contains("loss_sum"));   // unwritten
  EXPECT_EQ(rec["peak_rss_bytes"], nlohmann::json({10.0, 20.0}));
  EXPECT_EQ(rec["slowest_s"], 5.0);
  EXPECT_EQ(rec["coherence_bytes_inter"], 400.0);
  EXPECT_EQ(rec["comm_bytes_by_rank"]["replicas"], nlohmann::json({7.0, 9.0}));
  EXPECT_EQ(rec["tier_bytes"]["host"], 42);
  EXPECT_EQ(rec["step"], 3);
}

TEST(StepMetrics, OneRankNeedsNoCollectiveAndBeginStepForgets) {
  StepMetrics m(0, 1);
  m.sum("stop", 1, false);
  m.per_rank("peak_rss_bytes", 8);
  m.reduce([](double*, size_t) { FAIL() << "one rank called the collective"; });
  EXPECT_EQ(m.total("stop"), 1.0);
  EXPECT_EQ(m.by_rank("peak_rss_bytes"), std::vector<double>{8});
  m.begin_step();
  m.local("step", 2);
  m.reduce([](double*, size_t) {});
  EXPECT_EQ(m.record(), nlohmann::json({{"step", 2}}));
}

TEST(StepMetrics, MisuseIsNamed) {
  StepMetrics m(1, 2);
  m.sum("loss_sum", 1, false);
  try {
    m.total("loss_sum");
    FAIL() << "read before the reduction";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'loss_sum' read before the step's reduction"), std::string::npos) << e.what();
  }
  m.reduce([](double*, size_t) {});
  try {
    m.total("lost");
    FAIL() << "an unknown key";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no value 'lost'"), std::string::npos) << e.what();
  }
  try {
    m.sum("late", 1);
    FAIL() << "recorded after the reduction";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'late' recorded after"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace asteria
