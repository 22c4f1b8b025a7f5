// The coherence registry's rule on hand-made version sequences: a version is adopted when the
// adopted one is S versions behind, earlier when it differs by more than tau, never later than S;
// staleness in versions and steps; a restored block.
#include "runtime/coherence_registry.hpp"

#include <gtest/gtest.h>

#include "core/error.hpp"

using asteria::CoherenceRegistry;
using asteria::CoherenceRule;

TEST(CoherenceRegistry, SynchronousReplicationShipsEveryVersion) {
  CoherenceRegistry reg(CoherenceRule{1, 0}, 2);
  for (int v = 1; v <= 5; ++v) {
    EXPECT_TRUE(reg.computed(0, 10 * v, 0.0)) << v;
    EXPECT_EQ(reg.block(0).adopted, v);
    EXPECT_EQ(reg.block(0).newest, v);
  }
  EXPECT_EQ(reg.take_shipped(), 5);
  EXPECT_EQ(reg.take_skipped(), 0);
  EXPECT_EQ(reg.take_shipped(), 0);   // since the last call
  EXPECT_EQ(reg.block(1).adopted, 0);   // the other block computed nothing
}

TEST(CoherenceRegistry, StalenessThreeShipsTheFirstThenEveryThirdVersionAndNeverLater) {
  CoherenceRegistry reg(CoherenceRule{3, 0}, 1);
  // Version 1 shipped (the block's first); 2, 3 dropped; 4 shipped; 5, 6 dropped; 7 shipped ...
  const bool expected[] = {true, false, false, true, false, false, true, false, false};
  for (int v = 1; v <= 9; ++v) {
    EXPECT_EQ(reg.computed(0, v, 1e9), expected[v - 1]) << "version " << v;   // tau off: distance ignored
    EXPECT_LE(reg.block(0).newest - reg.block(0).adopted, 2) << "never S versions behind after a decision";
  }
  EXPECT_EQ(reg.block(0).adopted, 7);
  EXPECT_EQ(reg.block(0).adopted_step, 7);
  EXPECT_EQ(reg.take_shipped(), 3);
  EXPECT_EQ(reg.take_skipped(), 6);
}

TEST(CoherenceRegistry, ToleranceShipsALargeChangeEarly) {
  CoherenceRegistry reg(CoherenceRule{5, 0.1}, 1);
  EXPECT_TRUE(reg.computed(0, 1, 0.0));     // the first version, whatever its change
  EXPECT_FALSE(reg.computed(0, 2, 0.05));   // small change, 1 behind
  EXPECT_TRUE(reg.computed(0, 3, 0.2));     // > tau: now, 3 versions before S
  EXPECT_EQ(reg.block(0).adopted, 3);
  EXPECT_FALSE(reg.computed(0, 4, 0.1));    // exactly tau is not more than tau
  EXPECT_FALSE(reg.computed(0, 5, 0.0));
  EXPECT_FALSE(reg.computed(0, 6, 0.0));
  EXPECT_FALSE(reg.computed(0, 7, 0.0));
  EXPECT_TRUE(reg.computed(0, 8, 0.0));     // 5 behind: S, whatever the distance
  EXPECT_EQ(reg.block(0).adopted, 8);
}

TEST(CoherenceRegistry, StalenessInVersionsAndSteps) {
  CoherenceRegistry reg(CoherenceRule{3, 0}, 2);
  reg.computed(0, 5, 0);    // block 0's first version: shipped, adopted from step 5
  reg.computed(0, 10, 0);   // 1 behind
  reg.computed(0, 20, 0);   // 2 behind
  auto s = reg.staleness(30);   // block 1 computed nothing: 0 behind, on the initial state (step 0)
  EXPECT_EQ(s.max_versions, 2);
  EXPECT_DOUBLE_EQ(s.mean_versions, 1.0);
  EXPECT_EQ(s.max_steps, 30);
  EXPECT_DOUBLE_EQ(s.mean_steps, (25 + 30) / 2.0);
  reg.computed(0, 25, 0);   // 3 behind: shipped, block 0 adopted from step 25
  s = reg.staleness(30);
  EXPECT_EQ(s.max_versions, 0);
  EXPECT_DOUBLE_EQ(s.mean_versions, 0.0);
  EXPECT_DOUBLE_EQ(s.mean_steps, (5 + 30) / 2.0);
}

TEST(CoherenceRegistry, ARestoredBlockDecidesAsTheOriginal) {
  // What a checkpoint keeps of a block (set_block) gives the same decisions from there on.
  CoherenceRegistry a(CoherenceRule{3, 0}, 2), b(CoherenceRule{3, 0}, 2);
  a.computed(0, 4, 0);
  a.computed(0, 8, 0);
  b.set_block(0, a.block(0));
  EXPECT_EQ(b.block(0).newest, 2);
  EXPECT_EQ(b.block(0).adopted, 1);
  for (int v = 0; v < 4; ++v) EXPECT_EQ(b.computed(0, 9 + v, 0), a.computed(0, 9 + v, 0)) << v;
}

// Stateful: [adopted, newest, adopted_step] per block under "coherence.<name>"; a block the
// checkpoint has no field for keeps its versions; a malformed one is named with the file.
TEST(CoherenceRegistry, StateRoundTripsByBlockName) {
  CoherenceRegistry saved(CoherenceRule{2, 0}, 3), loaded(CoherenceRule{2, 0}, 3);
  saved.name_blocks({"0_0", "0_1", "1_0"});
  loaded.name_blocks({"0_0", "0_1", "1_0"});
  saved.computed(0, 4, 0.0);
  saved.computed(0, 8, 0.0);
  saved.computed(2, 12, 0.0);
  asteria::StateFields fields;
  asteria::save_states({&saved}, fields);
  EXPECT_EQ(fields, (asteria::StateFields{{"coherence.0_0", {1, 2, 4}}, {"coherence.0_1", {0, 0, 0}},
                                          {"coherence.1_0", {1, 1, 12}}}));
  fields.erase("coherence.0_1");
  loaded.set_block(1, {5, 6, 7});
  asteria::load_states({&loaded}, fields, "ck/rank00000.h5");
  EXPECT_EQ(loaded.block(0).newest, 2);
  EXPECT_EQ(loaded.block(0).adopted_step, 4);
  EXPECT_EQ(loaded.block(1).adopted, 5);   // no field: unchanged
  EXPECT_EQ(loaded.block(2).adopted_step, 12);
  fields["coherence.1_0"] = {1, 1};
  try {
    asteria::load_states({&loaded}, fields, "ck/rank00000.h5");
    FAIL() << "no error";
  } catch (const asteria::Error& e) {
    EXPECT_NE(std::string(e.what()).find("ck/rank00000.h5: value 'coherence.1_0' has 2 entries, expected 3"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(loaded.block(0).newest, 2);
}
