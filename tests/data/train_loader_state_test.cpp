// TrainLoader as a Stateful component (src/data/train_loader_state.cpp): its checkpoint fields,
// a round trip, and the errors of a checkpoint that does not fit.
#include <vector>

#include "data/loader.hpp"
#include "test_files.hpp"

namespace asteria {
namespace {

using test::expect_error;
using test::CountingFile;
using test::TempDir;

std::vector<int32_t> next(TrainLoader& loader) {
  std::vector<int32_t> in(2 * 10), out(2 * 10);
  loader.next_batch(2, in.data(), out.data());
  return in;
}

StateFields saved(TrainLoader& loader) {
  StateFields fields;
  save_states({&loader}, fields);
  return fields;
}

TEST(TrainLoaderState, FieldsAreThePositionTheSeedAndTheInstances) {
  CountingFile data(101);   // 10 instances of 10
  TrainLoader loader(data.file, 10, (uint64_t{7} << 32) | 9);
  for (int i = 0; i < 6; ++i) next(loader);   // epoch 1, index 2
  const StateFields f = saved(loader);
  EXPECT_EQ(f, (StateFields{{"loader.position", {1, 2}}, {"loader.seed", {7, 9}}, {"loader.instances", {10}}}));
}

TEST(TrainLoaderState, RoundTripContinuesLikeTheSavedLoader) {
  CountingFile data(101);
  TrainLoader first(data.file, 10, 3), resumed(data.file, 10, 3);
  for (int i = 0; i < 7; ++i) next(first);
  load_states({&resumed}, saved(first), "ck/rank00000.h5");
  EXPECT_EQ(resumed.position(), first.position());
  for (int i = 0; i < 12; ++i) EXPECT_EQ(next(resumed), next(first)) << "batch " << i;
}

TEST(TrainLoaderState, OtherDataOrAMissingPositionIsRefusedNamingTheFile) {
  CountingFile data(101), other(51);
  TrainLoader a(data.file, 10, 3), b(other.file, 10, 3);
  const StateFields f = saved(a);
  expect_error([&] { load_states({&b}, f, "ck/rank00000.h5"); },
               {"ck/rank00000.h5", "served 10 instances per epoch", "this run has 5"});
  StateFields no_position = f;
  no_position.erase("loader.position");
  expect_error([&] { load_states({&a}, no_position, "ck/rank00000.h5"); },
               {"ck/rank00000.h5", "'loader.position' is missing"});
}

}  // namespace
}  // namespace asteria
