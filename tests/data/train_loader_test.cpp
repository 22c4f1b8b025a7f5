#include <algorithm>
#include <vector>

#include "data/loader.hpp"
#include "test_files.hpp"

namespace asteria {
namespace {

using test::expect_error;
using test::CountingFile;
using test::TempDir;

struct Batch {
  std::vector<int32_t> inputs, targets;
  bool operator==(const Batch&) const = default;
};

Batch next(TrainLoader& loader, int batch, int seq) {
  Batch b{std::vector<int32_t>(batch * seq), std::vector<int32_t>(batch * seq)};
  loader.next_batch(batch, b.inputs.data(), b.targets.data());
  return b;
}

std::vector<Batch> batches(TrainLoader& loader, int count, int batch, int seq) {
  std::vector<Batch> out;
  for (int i = 0; i < count; ++i) out.push_back(next(loader, batch, seq));
  return out;
}

TEST(TrainLoader, InstancesAreConsecutiveWindowsShiftedByOne) {
  CountingFile data(101);  // (101 - 1) / 10 = 10 instances
  TrainLoader loader(data.file, 10, 5);
  EXPECT_EQ(loader.num_instances(), 10u);
  const auto order = epoch_permutation(10, 5, 0);
  const Batch b = next(loader, 3, 10);
  for (int r = 0; r < 3; ++r)
    for (int t = 0; t < 10; ++t) {
      EXPECT_EQ(b.inputs[r * 10 + t], static_cast<int32_t>(order[r] * 10 + t));
      EXPECT_EQ(b.targets[r * 10 + t], static_cast<int32_t>(order[r] * 10 + t + 1));
    }
  EXPECT_EQ(loader.position(), (LoaderPosition{0, 3}));
}

TEST(TrainLoader, LastTokenIsOnlyATarget) {
  CountingFile data(21);  // exactly 2 instances of 10: tokens 0..20
  TrainLoader loader(data.file, 10, 0);
  ASSERT_EQ(loader.num_instances(), 2u);
  const Batch b = next(loader, 2, 10);
  int32_t max_target = 0;
  for (int32_t t : b.targets) max_target = std::max(max_target, t);
  EXPECT_EQ(max_target, 20);
}

TEST(TrainLoader, SameSeedSameBatchesOtherSeedOtherBatches) {
  CountingFile data(5001);
  TrainLoader a(data.file, 16, 1234), b(data.file, 16, 1234), c(data.file, 16, 99);
  const auto ba = batches(a, 20, 4, 16);
  EXPECT_EQ(ba, batches(b, 20, 4, 16));
  EXPECT_NE(ba, batches(c, 20, 4, 16));
}

TEST(TrainLoader, EachEpochServesEveryInstanceOnceThenReshuffles) {
  CountingFile data(71);  // 7 instances of 10
  TrainLoader loader(data.file, 10, 3);
  std::vector<std::vector<int>> starts(3);  // instance starts served in each epoch
  for (int epoch = 0; epoch < 3; ++epoch)
    for (int i = 0; i < 7; ++i) {
      const Batch b = next(loader, 1, 10);
      starts[epoch].push_back(b.inputs[0] / 10);
    }
  for (int epoch = 0; epoch < 3; ++epoch) {
    std::vector<uint64_t> served(starts[epoch].begin(), starts[epoch].end());
    EXPECT_EQ(served, epoch_permutation(7, 3, epoch)) << "epoch " << epoch;
  }
  EXPECT_NE(starts[0], starts[1]);
  EXPECT_EQ(loader.position(), (LoaderPosition{2, 7}));
}

TEST(TrainLoader, BatchCanSpanTheEpochBoundary) {
  CountingFile data(51);  // 5 instances
  TrainLoader loader(data.file, 10, 8);
  next(loader, 3, 10);
  const Batch b = next(loader, 4, 10);  // 2 from epoch 0, 2 from epoch 1
  const auto e0 = epoch_permutation(5, 8, 0), e1 = epoch_permutation(5, 8, 1);
  EXPECT_EQ(b.inputs[0 * 10] / 10, static_cast<int32_t>(e0[3]));
  EXPECT_EQ(b.inputs[1 * 10] / 10, static_cast<int32_t>(e0[4]));
  EXPECT_EQ(b.inputs[2 * 10] / 10, static_cast<int32_t>(e1[0]));
  EXPECT_EQ(b.inputs[3 * 10] / 10, static_cast<int32_t>(e1[1]));
  EXPECT_EQ(loader.position(), (LoaderPosition{1, 2}));
}

TEST(TrainLoader, RestoredLoaderContinuesLikeAnUninterruptedOne) {
  CountingFile data(1001);  // 31 instances of 32
  TrainLoader uninterrupted(data.file, 32, 77);
  const auto all = batches(uninterrupted, 40, 3, 32);  // ~4 epochs

  for (int cut : {0, 1, 10, 11, 20, 39}) {
    TrainLoader first(data.file, 32, 77);
    const auto before = batches(first, cut, 3, 32);
    const LoaderPosition saved = first.position();
    TrainLoader resumed(data.file, 32, 77);
    resumed.restore(saved);
    EXPECT_EQ(resumed.position(), saved);
    const auto after = batches(resumed, 40 - cut, 3, 32);
    for (int i = 0; i < 40; ++i)
      EXPECT_EQ(i < cut ? before[i] : after[i - cut], all[i]) << "cut " << cut << " batch " << i;
  }
}

TEST(TrainLoader, RestoreAtTheEndOfAnEpochRollsOver) {
  CountingFile data(51);  // 5 instances
  TrainLoader a(data.file, 10, 1), b(data.file, 10, 1);
  batches(a, 5, 1, 10);
  ASSERT_EQ(a.position(), (LoaderPosition{0, 5}));
  b.restore(a.position());
  EXPECT_EQ(next(a, 2, 10), next(b, 2, 10));
}

TEST(TrainLoader, RestoreBeyondTheEpochIsAnError) {
  CountingFile data(51);
  TrainLoader loader(data.file, 10, 1);
  expect_error([&] { loader.restore({0, 6}); }, {data.file.path(), "index 6", "5 instances"});
}

TEST(TrainLoader, SequenceLongerThanTheDataIsAnError) {
  CountingFile data(64);
  expect_error([&] { TrainLoader(data.file, 64, 1); },
               {data.file.path(), "64 tokens", "sequence length 64", "65 tokens"});
  TrainLoader ok(data.file, 63, 1);  // 64 tokens: exactly one instance of 63
  EXPECT_EQ(ok.num_instances(), 1u);
  expect_error([&] { TrainLoader(data.file, 0, 1); }, {"sequence length", "0"});
}

}  // namespace
}  // namespace asteria
