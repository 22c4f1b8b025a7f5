// The plan of a step: op order, dependencies, and the executor's checks.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

#include "core/error.hpp"
#include "runtime/executor.hpp"
#include "runtime/plan_builder.hpp"
#include "train/step_plan.hpp"

using namespace asteria;

// The executor owns a staging thread: its death tests re-execute the binary instead of forking.
class ExecutorDeathTest : public ::testing::Test {
 protected:
  void SetUp() override { GTEST_FLAG_SET(death_test_style, "threadsafe"); }
};

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

// Appends an op to a hand-made plan; its id is its index.
void append_op(Plan& p, OpKind kind, Lane lane, std::vector<int> deps) {
  Op op;
  op.id = static_cast<int>(p.ops.size());
  op.kind = kind;
  op.lane = lane;
  op.deps = std::move(deps);
  p.ops.push_back(std::move(op));
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
    if (op.kind == OpKind::Backward && op.layer < 3) {
      EXPECT_EQ(p.ops[op.deps[0]].layer, op.layer + 1);
    }
    if (op.kind == OpKind::ClipGrads) {
      clip = op.id;
      EXPECT_EQ(op.deps.size(), 4u);
    }
    if (op.kind == OpKind::OptimStep) {
      EXPECT_EQ(op.deps[0], clip);
    }
    if (op.kind == OpKind::LoadBatch && op.micro == 1) {
      EXPECT_EQ(p.ops[op.deps[0]].kind, OpKind::Backward);
      EXPECT_EQ(p.ops[op.deps[0]].layer, 0);
    }
  }
}

// A contributor that, after the step's last op, checks find() against a scan of the plan
// (the latest op of the kind for (layer, micro), -1 matching any) for every kind, layer and
// micro-batch, "any" included.
struct FindChecker : PlanContributor {
  int checked = 0;
  void step_end(PlanBuilder& b) override {
    const int L = b.shape().num_layers, M = b.shape().micro_batches;
    const int last = b.find(OpKind::OptimStep, 0);   // the model's and optimizer's last op
    ASSERT_GT(last, 0);
    for (int k = 0; k < kNumOpKinds; ++k)
      for (int layer = -1; layer < L + 1; ++layer)
        for (int micro = -1; micro < M + 1; ++micro) {
          const OpKind kind = static_cast<OpKind>(k);
          int latest = -1;
          for (int i = 0; i <= last; ++i) {
            const Op& op = b.op(i);
            if (op.kind == kind && (layer < 0 || op.layer == layer) && (micro < 0 || op.micro == micro)) latest = i;
          }
          EXPECT_EQ(b.find(kind, layer, micro), latest) << to_string(kind) << " " << layer << " " << micro;
          ++checked;
        }
  }
};

TEST(Plan, FindGivesTheLatestMatchingOp) {
  ModelStepOps m(false);
  OptimizerStepOps o;
  FindChecker check;
  PlanBuilder b;
  b.add_contributor(&m);
  b.add_contributor(&o);
  b.add_contributor(&check);
  Plan p;
  for (int micro : {1, 3}) b.build({5, 4, micro}, p);   // the second build starts its index afresh
  EXPECT_GT(check.checked, 0);
}

TEST(Plan, DescribeNamesLayers) {
  Plan p = build(3, 1);
  std::string s = p.describe({"embed", "blocks.0", "head"});
  EXPECT_NE(s.find("compute  forward       blocks.0     micro=0"), std::string::npos) << s;
  EXPECT_NE(s.find("optim_step    embed "), std::string::npos) << s;
  EXPECT_NE(s.find("writes=params(head),optim(head),grads(head)"), std::string::npos) << s;
}

TEST(Plan, TiedHeadReadsAndWritesTheEmbedding) {
  Plan p = build(3, 1, /*tied=*/true);
  std::string s = p.describe({"embed", "blocks.0", "head"});
  EXPECT_NE(s.find("backward      head         micro=0 after=3 reads=params(head),act(head),batch,params(embed) "
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

TEST_F(ExecutorDeathTest, RefusesOpBeforeItsDependency) {
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

TEST_F(ExecutorDeathTest, RefusesNonResidentState) {
  Plan p = build(2, 1);
  Executor ex;
  for (int k = 0; k < kNumOpKinds; ++k) ex.bind(static_cast<OpKind>(k), [](const Op&) {});
  ex.add_residency_check([](const Op&, const StateRef& r) { return r.kind != StateKind::Grads; });
  EXPECT_DEATH(ex.run(p), "not resident");
}

TEST(Executor, CommOpsRunInOrderOnTheirOwnThreadBesideTheStagingLane) {
  // A gather on the comm lane runs while the staging lane works and the compute lane waits for
  // it; a comm op that depends on a compute op (a reduce-scatter after its backward) waits for it.
  Executor ex;
  Plan p;
  auto add = [&](OpKind k, Lane lane, std::vector<int> deps) { append_op(p, k, lane, std::move(deps)); };
  add(OpKind::Gather, Lane::Comm, {});               // 0
  add(OpKind::TierPrefetch, Lane::Staging, {});      // 1
  add(OpKind::Forward, Lane::Compute, {0});          // 2: waits for the gather
  add(OpKind::ReduceScatter, Lane::Comm, {2});       // 3: after the forward
  add(OpKind::GradNorm, Lane::Compute, {3});         // 4: waits for the reduce-scatter
  std::mutex mu;
  std::vector<std::string> order;
  std::thread::id main_thread = std::this_thread::get_id(), comm_thread, staging_thread;
  auto log = [&](const char* what) {
    std::lock_guard<std::mutex> l(mu);
    order.push_back(what);
  };
  ex.bind(OpKind::Gather, [&](const Op&) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    comm_thread = std::this_thread::get_id();
    log("gather");
  });
  ex.bind(OpKind::TierPrefetch, [&](const Op&) { staging_thread = std::this_thread::get_id(); });
  ex.bind(OpKind::Forward, [&](const Op&) { log("forward"); });
  ex.bind(OpKind::ReduceScatter, [&](const Op&) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    EXPECT_EQ(std::this_thread::get_id(), comm_thread);
    log("reduce_scatter");
  });
  ex.bind(OpKind::GradNorm, [&](const Op&) { log("grad_norm"); });
  ex.run(p);
  EXPECT_EQ(order, (std::vector<std::string>{"gather", "forward", "reduce_scatter", "grad_norm"}));
  EXPECT_NE(comm_thread, main_thread);
  EXPECT_NE(comm_thread, staging_thread);
  EXPECT_GT(ex.wait_seconds(OpKind::Forward), 0.005);    // the compute lane stalled on the gather
  EXPECT_GT(ex.wait_seconds(OpKind::GradNorm), 0.005);   // and on the reduce-scatter
}

TEST(Executor, CommOpErrorSurfacesFromRunAndSkipsTheRest) {
  // A collective's timeout must end the step with its message, naming the op.
  Executor ex;
  Plan p;
  auto add = [&](OpKind k, Lane lane, std::vector<int> deps) { append_op(p, k, lane, std::move(deps)); };
  add(OpKind::Gather, Lane::Comm, {});          // 0: fails
  add(OpKind::Gather, Lane::Comm, {});          // 1: must not run
  add(OpKind::Forward, Lane::Compute, {0});     // 2: must not run
  std::atomic<int> gathers{0};
  bool ran = false;
  ex.bind(OpKind::Gather, [&](const Op& op) {
    ++gathers;
    if (op.id == 0) throw Error("gather of blocks.3: not done after 5 s");
  });
  ex.bind(OpKind::Forward, [&](const Op&) { ran = true; });
  try {
    ex.run(p);
    FAIL() << "the comm error was swallowed";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("gather of blocks.3"), std::string::npos);
  }
  EXPECT_EQ(gathers.load(), 1);
  EXPECT_FALSE(ran);
}

TEST(Executor, StagingOpsRunInOrderAndHostOpsOnTheWorkerPool) {
  WorkerPool pool(2);
  Executor ex(&pool);
  Plan p;
  auto add = [&](OpKind k, Lane lane, std::vector<int> deps) { append_op(p, k, lane, std::move(deps)); };
  add(OpKind::OptimStep, Lane::Compute, {});        // 0
  add(OpKind::Snapshot, Lane::Staging, {0});        // 1
  add(OpKind::RootJob, Lane::Host, {1});            // 2
  add(OpKind::PublishWait, Lane::Compute, {1});     // 3: waits for the staging op
  std::mutex mu;
  std::vector<std::string> order;
  std::atomic<bool> staged{false};
  std::thread::id main_thread = std::this_thread::get_id(), staging_thread, host_thread;
  ex.bind(OpKind::OptimStep, [&](const Op&) { std::lock_guard<std::mutex> l(mu); order.push_back("optim"); });
  ex.bind(OpKind::Snapshot, [&](const Op&) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    std::lock_guard<std::mutex> l(mu);
    order.push_back("snapshot");
    staging_thread = std::this_thread::get_id();
    staged = true;
  });
  ex.bind_host(OpKind::RootJob, [&](const Op&, int) {
    std::lock_guard<std::mutex> l(mu);
    order.push_back("root_job");
    host_thread = std::this_thread::get_id();
  });
  ex.bind(OpKind::PublishWait, [&](const Op&) {
    EXPECT_TRUE(staged.load());  // a compute op waits for its staging dependency
    std::lock_guard<std::mutex> l(mu);
    order.push_back("publish_wait");
  });
  ex.run(p);
  pool.drain();
  ASSERT_EQ(order.size(), 4u);
  EXPECT_EQ(order[0], "optim");
  EXPECT_EQ(order[1], "snapshot");
  EXPECT_NE(staging_thread, main_thread);
  EXPECT_NE(host_thread, main_thread);
  EXPECT_NE(host_thread, staging_thread);
  EXPECT_GT(ex.compute_wait_seconds(), 0.005);  // the publish_wait stalled on the snapshot
}

TEST(Executor, StagingOpErrorSurfacesFromRunAndLaterStagingOpsAreSkipped) {
  // A failed tier move (say a corrupt disk page) must end the step with its error, not
  // terminate the process or let a compute op use what was not loaded.
  Executor ex;
  Plan p;
  auto add = [&](OpKind k, Lane lane, std::vector<int> deps) { append_op(p, k, lane, std::move(deps)); };
  add(OpKind::TierPrefetch, Lane::Staging, {});   // 0: fails
  add(OpKind::TierPrefetch, Lane::Staging, {});   // 1: must not run
  add(OpKind::TierWait, Lane::Compute, {0});      // 2: must not run
  std::atomic<int> prefetches{0};
  bool waited = false;
  ex.bind(OpKind::TierPrefetch, [&](const Op& op) {
    ++prefetches;
    if (op.id == 0) throw Error("disk tier: state 'x' failed its checksum");
  });
  ex.bind(OpKind::TierWait, [&](const Op&) { waited = true; });
  try {
    ex.run(p);
    FAIL() << "the staging error was swallowed";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("state 'x' failed its checksum"), std::string::npos);
  }
  EXPECT_EQ(prefetches.load(), 1);
  EXPECT_FALSE(waited);
  // The executor is usable again after the error.
  p.ops.resize(1);
  p.ops[0].lane = Lane::Compute;
  ex.bind(OpKind::TierPrefetch, [&](const Op&) { ++prefetches; });
  ex.run(p);
  EXPECT_EQ(prefetches.load(), 2);
}
