// The shadow pipeline as a Stateful component (src/runtime/shadow_state.cpp): open refreshes
// round-trip under "shadow.open.<layer>_<block>.*"; a run without a pipeline refuses a checkpoint
// holding some; shadow_state_parts.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/error.hpp"
#include "runtime/shadow.hpp"
#include "small_soap.hpp"

namespace asteria {
namespace {

ParamTable table() { return testing::small_table(); }
SecondOrderParams soap() { return testing::small_soap(); }

// A pipeline on the compute lane whose refreshes publish two steps after they open.
ShadowOptions delayed() {
  ShadowOptions o;
  o.delay = ShadowDelay{2, 0};
  return o;
}

// The fields of one open refresh of layer 0's block `b` (rows x cols), publishing at step 9.
void put_open(StateFields& f, int b, int64_t rows, int64_t cols, bool change) {
  const std::string k = "shadow.open.0_" + std::to_string(b) + ".";
  f[k + "where"] = {0, static_cast<double>(b), 9, static_cast<double>(rows), static_cast<double>(cols), 0, 1, 0};
  f[k + "left_root"] = {};
  f[k + "right_root"] = {};
  f[k + "left_basis"] = std::vector<double>(rows * rows, 0.25 + b);
  f[k + "right_basis"] = std::vector<double>(cols * cols, -0.5);
  f[k + "left_perm"] = {2, 0, 1};
  f[k + "right_perm"] = cols == 3 ? std::vector<double>{1, 2, 0} : std::vector<double>{1, 0};
  if (change) f[k + "change"] = {0.375};
}

TEST(ShadowState, OpenRefreshesRoundTrip) {
  SecondOrderOptimizer opt(soap(), {table()});
  ShadowPipeline shadow(opt, delayed());
  const auto& blocks = opt.blocks(0);
  ASSERT_GE(blocks.size(), 2u);
  StateFields saved;
  put_open(saved, 0, blocks[0].rows, blocks[0].cols, false);
  put_open(saved, 1, blocks[1].rows, blocks[1].cols, true);
  load_states({&shadow}, saved, "ck/rank00000.h5");
  EXPECT_EQ(shadow.in_flight(), 2);
  const std::vector<OpenRefresh> open = shadow.finish_open_refreshes();
  ASSERT_EQ(open.size(), 2u);
  EXPECT_EQ(open[1].publish_step, 9);
  EXPECT_TRUE(open[1].job.left_newton_done);
  EXPECT_EQ(open[1].job.change, 0.375);
  EXPECT_EQ(open[0].job.change, -1);   // none saved: not computed
  StateFields again;
  save_states({&shadow}, again);
  EXPECT_EQ(again, saved);
}

TEST(ShadowState, MalformedOpenRefreshIsNamedWithTheFile) {
  SecondOrderOptimizer opt(soap(), {table()});
  ShadowPipeline shadow(opt, delayed());
  StateFields f;
  put_open(f, 0, 3, 3, false);
  f["shadow.open.0_0.where"].pop_back();
  try {
    load_states({&shadow}, f, "ck/rank00000.h5");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("ck/rank00000.h5: value 'shadow.open.0_0.where' has 7 entries, expected 8"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(shadow.in_flight(), 0);   // nothing restored
}

TEST(ShadowState, WithoutAPipelineACheckpointWithOpenRefreshesIsRefused) {
  const std::vector<Stateful*> parts = shadow_state_parts(nullptr);
  ASSERT_EQ(parts.size(), 1u);
  StateFields none;
  save_states(parts, none);
  EXPECT_TRUE(none.empty());
  load_states(parts, {{"loader.position", {0, 0}}}, "ck/rank00000.h5");   // nothing in flight: fine
  StateFields f;
  put_open(f, 0, 3, 3, false);
  try {
    load_states(parts, f, "ck/rank00000.h5");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("ck/rank00000.h5: holds refreshes in flight"), std::string::npos) << e.what();
  }
}

TEST(ShadowState, PartsAreThePipelineAloneWithoutReplicas) {
  SecondOrderOptimizer opt(soap(), {table()});
  ShadowPipeline shadow(opt, delayed());
  EXPECT_EQ(shadow_state_parts(&shadow), std::vector<Stateful*>{&shadow});
}

}  // namespace
}  // namespace asteria
