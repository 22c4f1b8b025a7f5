#include <vector>

#include "data/loader.hpp"
#include "test_files.hpp"

namespace asteria {
namespace {

using test::expect_error;
using test::TempDir;

struct Fixture {
  TempDir dir;
  TokenFile file;
  explicit Fixture(uint32_t n) {
    std::vector<uint32_t> ids(n);
    for (uint32_t i = 0; i < n; ++i) ids[i] = (i * 7) % 500;
    test::write_u32(dir.file("val.bin"), ids);
    file = TokenFile(dir.file("val.bin"), TokenDtype::U32, 500);
  }
};

TEST(EvalBatches, AreTheFirstInstancesInFileOrder) {
  Fixture data(1000);  // 124 instances of 8
  EvalBatches eval(data.file, 8, 4, 3);
  ASSERT_EQ(eval.count(), 3);
  std::vector<int32_t> in(32), tg(32);
  for (int b = 0; b < 3; ++b) {
    eval.get(b, in.data(), tg.data());
    for (int r = 0; r < 4; ++r)
      for (int t = 0; t < 8; ++t) {
        const int token = (b * 4 + r) * 8 + t;
        EXPECT_EQ(in[r * 8 + t], (token * 7) % 500);
        EXPECT_EQ(tg[r * 8 + t], ((token + 1) * 7) % 500);
      }
  }
}

TEST(EvalBatches, AreTheSameEveryTime) {
  Fixture data(1000);
  EvalBatches a(data.file, 8, 4, 5), b(data.file, 8, 4, 5);
  std::vector<int32_t> in1(32), tg1(32), in2(32), tg2(32);
  for (int i = 0; i < 5; ++i) {
    a.get(i, in1.data(), tg1.data());
    a.get(i, in2.data(), tg2.data());  // again, same object
    EXPECT_EQ(in1, in2);
    b.get(i, in2.data(), tg2.data());  // another object
    EXPECT_EQ(in1, in2);
    EXPECT_EQ(tg1, tg2);
  }
}

TEST(EvalBatches, FewerWhenTheFileIsShort) {
  Fixture data(100);  // 12 instances of 8: 3 full batches of 4
  EXPECT_EQ(EvalBatches(data.file, 8, 4, 10).count(), 3);
  EXPECT_EQ(EvalBatches(data.file, 8, 12, 10).count(), 1);
}

TEST(EvalBatches, LessThanOneBatchIsAnError) {
  Fixture data(100);
  expect_error([&] { EvalBatches(data.file, 8, 13, 10); },
               {data.file.path(), "100 tokens", "12 instances", "batch of 13"});
  expect_error([&] { EvalBatches(data.file, 100, 1, 10); },
               {data.file.path(), "sequence length 100"});
}

}  // namespace
}  // namespace asteria
