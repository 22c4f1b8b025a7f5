// The plan of a step: op order, dependencies, and the executor's checks.
#include <gtest/gtest.h>

#include <algorithm>

#include "runtime/executor.hpp"
#include "runtime/plan_builder.hpp"
#include "train/step_plan.hpp"

using namespace asteria;

namespace {

Plan build(int layers, int micro, bool tied = false) {
  ModelStepOps m(tied);
  OptimizerStepOps o;
  PlanBuilder b;
  b.add_contributor(&m);
  b.add_contributor(&o);
  Plan p;
  b.build({5, layers, micro}, p);
  return p;
}

int count(const Plan& p, OpKind k) {
  return static_cast<int>(std::count_if(p.ops.begin(), p.ops.end(), [k](const Op& op) { return op.kind == k; }));
}

}  // namespace

TEST(Plan, HasOneOpPerLayerPerPhase) {
  const int L = 4, M = 3;
  Plan p = build(L, M);
  EXPECT_EQ(count(p, OpKind::LoadBatch), M);
  EXPECT_EQ(count(p, OpKind::Forward), L * M);
  EXPECT_EQ(count(p, OpKind::Backward), L * M);
  EXPECT_EQ(count(p, OpKind::GradNorm), L);
  EXPECT_EQ(count(p, OpKind::ClipGrads), 1);
  EXPECT_EQ(count(p, OpKind::OptimStep), L);
  EXPECT_EQ(p.step, 5);
}

TEST(Plan, DependenciesComeFirstAndOrderLayers) {
  Plan p = build(4, 2);
  for (const Op& op : p.ops)
    for (int d : op.deps) EXPECT_LT(d, op.id);
  // Forward runs layers upward, backward downward, optimizer after the clip.
  int clip = -1;
  for (const Op& op : p.ops) {
    if (op.kind == OpKind::Forward && op.layer > 0) {
      ASSERT_EQ(op.deps.size(), 1u);
      EXPECT_EQ(p.ops[op.deps[0]].kind, OpKind::Forward);
      EXPECT_EQ(p.ops[op.deps[0]].layer, op.layer - 1);
    }
    if (op.kind == OpKind::Backward && op.layer < 3) EXPECT_EQ(p.ops[op.deps[0]].layer, op.layer + 1);
    if (op.kind == OpKind::ClipGrads) {
      clip = op.id;
      EXPECT_EQ(op.deps.size(), 4u);
    }
    if (op.kind == OpKind::OptimStep) EXPECT_EQ(op.deps[0], clip);
    if (op.kind == OpKind::LoadBatch && op.micro == 1) {
      EXPECT_EQ(p.ops[op.deps[0]].kind, OpKind::Backward);
      EXPECT_EQ(p.ops[op.deps[0]].layer, 0);
    }
  }
}

TEST(Plan, DescribeNamesLayers) {
  Plan p = build(3, 1);
  std::string s = p.describe({"embed", "blocks.0", "head"});
  EXPECT_NE(s.find("compute  forward     blocks.0     micro=0"), std::string::npos) << s;
  EXPECT_NE(s.find("optim_step  embed "), std::string::npos) << s;
  EXPECT_NE(s.find("writes=params(head),optim(head),grads(head)"), std::string::npos) << s;
}

TEST(Plan, TiedHeadReadsAndWritesTheEmbedding) {
  Plan p = build(3, 1, /*tied=*/true);
  std::string s = p.describe({"embed", "blocks.0", "head"});
  EXPECT_NE(s.find("backward    head         micro=0 after=3 reads=params(head),act(head),batch,params(embed) "
                   "writes=grads(head),grads(embed)"), std::string::npos) << s;
}

TEST(Executor, RunsOpsInPlanOrderThroughHandlers) {
  Plan p = build(3, 2);
  Executor ex;
  std::vector<int> seen;
  for (int k = 0; k < kNumOpKinds; ++k) ex.bind(static_cast<OpKind>(k), [&](const Op& op) { seen.push_back(op.id); });
  ex.run(p);
  ASSERT_EQ(seen.size(), p.ops.size());
  for (size_t i = 0; i < seen.size(); ++i) EXPECT_EQ(seen[i], static_cast<int>(i));
}

TEST(ExecutorDeathTest, RefusesOpBeforeItsDependency) {
  Plan p;
  Op a;
  a.id = 0;
  a.kind = OpKind::Forward;
  a.deps = {1};  // depends on an op that comes later: a bug
  Op b;
  b.id = 1;
  b.kind = OpKind::Forward;
  p.ops = {a, b};
  Executor ex;
  ex.bind(OpKind::Forward, [](const Op&) {});
  EXPECT_DEATH(ex.run(p), "runs before its dependency");
}

TEST(ExecutorDeathTest, RefusesNonResidentState) {
  Plan p = build(2, 1);
  Executor ex;
  for (int k = 0; k < kNumOpKinds; ++k) ex.bind(static_cast<OpKind>(k), [](const Op&) {});
  ex.set_residency_check([](const StateRef& r) { return r.kind != StateKind::Grads; });
  EXPECT_DEATH(ex.run(p), "not resident");
}

TEST(ExecutorDeathTest, RefusesLaneWithoutWorker) {
  Plan p;
  Op a;
  a.id = 0;
  a.kind = OpKind::OptimStep;
  a.lane = Lane::Comm;
  p.ops = {a};
  Executor ex;
  ex.bind(OpKind::OptimStep, [](const Op&) {});
  EXPECT_DEATH(ex.run(p), "no worker");
}
