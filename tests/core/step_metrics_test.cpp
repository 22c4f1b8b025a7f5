// StepMetrics: each kind of value combined over the ranks as its contract says, the record's
// nested keys, and misuse named. Two ranks are simulated: rank 0's collector is reduced with a
// sum that adds what rank 1 would have put in the same slots.
#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
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
    if (count == 2) {   // the keys' check: rank 1 recorded the same keys
      data[1] = data[0];
      return;
    }
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
  m.reduce([](double* data, size_t count) {
    if (count == 2) data[0] = data[1];   // the keys' check: rank 0 recorded the same keys
  });
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

// Two ranks as two threads: each call waits for the other rank's call and both get the sum (the
// counts must agree, as MPI's would have to).
class TwoRankSum {
 public:
  StepMetrics::SumOverRanks for_rank(int rank) {
    return [this, rank](double* data, size_t count) { sum(rank, data, count); };
  }

 private:
  void sum(int rank, double* data, size_t count) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return !ready_[rank]; });   // the last round taken by this rank
    buffer_[rank].assign(data, data + count);
    ready_[rank] = true;
    cv_.notify_all();
    cv_.wait(lock, [&] { return ready_[1 - rank] || taken_[1 - rank]; });
    ASSERT_EQ(buffer_[0].size(), buffer_[1].size()) << "the ranks' collectives differ in size";
    for (size_t i = 0; i < count; ++i) data[i] = buffer_[0][i] + buffer_[1][i];
    taken_[rank] = true;
    if (taken_[0] && taken_[1]) ready_[0] = ready_[1] = taken_[0] = taken_[1] = false;
    cv_.notify_all();
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<double> buffer_[2];
  bool ready_[2] = {false, false}, taken_[2] = {false, false};
};

// Records `keys` as sums on `rank` and reduces; the error's text, or "" when it reduced.
std::string reduce_keys(int rank, const std::vector<std::string>& keys, TwoRankSum& two) {
  StepMetrics m(rank, 2);
  for (const std::string& k : keys) m.sum(k, 1.0);
  try {
    m.reduce(two.for_rank(rank));
    return "";
  } catch (const Error& e) {
    return e.what();
  }
}

TEST(StepMetrics, RanksWithOtherKeysAreNamedBeforeTheValuesAreSummed) {
  // The same keys: reduced (twice: the rounds of the simulated collective are reusable).
  for (int round = 0; round < 2; ++round) {
    TwoRankSum two;
    std::string e0, e1;
    std::thread t([&] { e1 = reduce_keys(1, {"a", "b"}, two); });
    e0 = reduce_keys(0, {"a", "b"}, two);
    t.join();
    EXPECT_EQ(e0, "");
    EXPECT_EQ(e1, "");
  }
  // Rank 1 recorded a key rank 0 did not, in the middle: both name it at position 1, each its own.
  TwoRankSum two;
  std::string e0, e1;
  std::thread t([&] { e1 = reduce_keys(1, {"a", "extra", "b"}, two); });
  e0 = reduce_keys(0, {"a", "b"}, two);
  t.join();
  EXPECT_NE(e1.find("rank 1 recorded other combined keys than rank 0"), std::string::npos) << e1;
  EXPECT_NE(e1.find("at position 1 this rank (1) recorded 'extra' (3 keys in all; rank 0: 2)"), std::string::npos) << e1;
  EXPECT_NE(e0.find("at position 1 this rank (0) recorded 'b' (2 keys in all; rank 1: 3)"), std::string::npos) << e0;
}

TEST(StepMetrics, TheSameKeysInAnotherOrderOrKindDiffer) {
  for (const bool swap_kind : {false, true}) {
    TwoRankSum two;
    std::string e0, e1;
    std::thread t([&] {
      StepMetrics m(1, 2);
      if (swap_kind) {
        m.max("x", 1);
        m.max("y", 1);
      } else {
        m.max("y", 1);
        m.max("x", 1);
      }
      try {
        m.reduce(two.for_rank(1));
      } catch (const Error& e) {
        e1 = e.what();
      }
    });
    StepMetrics m(0, 2);
    m.max("x", 1);
    if (swap_kind) m.per_rank("y", 1); else m.max("y", 1);
    try {
      m.reduce(two.for_rank(0));
    } catch (const Error& e) {
      e0 = e.what();
    }
    t.join();
    const std::string at = swap_kind ? "at position 1" : "at position 0";
    EXPECT_NE(e0.find(at), std::string::npos) << e0;
    EXPECT_NE(e1.find(at), std::string::npos) << e1;
  }
}

}  // namespace
}  // namespace asteria
