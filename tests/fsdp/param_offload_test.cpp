// Parameters on the disk tier (fsdp/param_offload.hpp, param_offload_plan_ops.hpp): the store
// gives back the floats written, keeps the other layers in memory and counts its traffic; the
// plan brings every offloaded layer in before each use, never holds more buffers than it sized
// the pool for, and writes each layer back after its optimizer step; run by the executor over
// several steps, every step reads what the step before wrote.
#include "fsdp/param_offload.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "../integration/test_util.hpp"
#include "core/error.hpp"
#include "fsdp/param_offload_plan_ops.hpp"
#include "runtime/executor.hpp"
#include "runtime/plan_builder.hpp"
#include "train/step_plan.hpp"

using namespace asteria;
using asteria::testing::TempDir;

namespace {

// Five layers as a model's: a small embedding, three blocks on disk (of other sizes, one not a
// whole page), a head.
const std::vector<size_t> kFloats = {300, 5000, 4096, 1234, 50};
const std::vector<bool> kOnDisk = {false, true, true, true, false};
const std::vector<std::string> kNames = {"embed", "blocks.0", "blocks.1", "blocks.2", "head"};

std::vector<float> values(size_t n, float base) {
  std::vector<float> v(n);
  std::iota(v.begin(), v.end(), base);
  return v;
}

}  // namespace

TEST(OffloadedParams, GivesBackWhatWasWrittenAndKeepsTheOthersInMemory) {
  TempDir dir("param-offload");
  OffloadedParams store(kFloats, kOnDisk, kNames, 2, dir.file("tiers/params.bin"), 5.0);
  const ParamOffloadBytes b = store.bytes();
  EXPECT_EQ(b.in_memory, (300 + 50) * sizeof(float) + 2 * 5120 * sizeof(float));   // 2 buffers of whole pages
  EXPECT_EQ(b.on_disk, 3 * 4096 + 20480 + 16384 + 8192);                           // a header page per layer
  EXPECT_NE(store.resident(0), nullptr);
  EXPECT_EQ(store.resident(1), nullptr);
  for (int l = 0; l < 5; ++l) store.copy_in(l, values(kFloats[l], 10.0f * l).data());
  EXPECT_EQ(store.take_traffic().written, (5000 + 4096 + 1234) * sizeof(float));
  for (int l = 0; l < 5; ++l) {
    std::vector<float> out(kFloats[l]);
    store.copy_out(l, out.data());
    EXPECT_EQ(out, values(kFloats[l], 10.0f * l)) << kNames[l];
  }
  // A step's use: loaded, changed, stored; read back changed. Loaded and released: unwritten.
  float* p = store.load(2);
  EXPECT_EQ(store.held(2), p);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 4096, 0u);
  EXPECT_EQ(p[7], 27.0f);
  p[7] = -1.0f;
  store.store(2);
  EXPECT_EQ(store.held(2), nullptr);
  p = store.load(2);
  EXPECT_EQ(p[7], -1.0f);
  p[7] = 5.0f;
  store.release(2);   // not written
  EXPECT_EQ(store.load(2)[7], -1.0f);
  store.store(2);     // unchanged: nothing written
  const OffloadedParams::Traffic t = store.take_traffic();
  EXPECT_EQ(t.read, 3 * 4096 * sizeof(float) + (5000 + 4096 + 1234) * sizeof(float));
  EXPECT_EQ(t.written, 4096 * sizeof(float));
}

TEST(OffloadedParams, ACorruptSlotIsRefusedNamingTheLayer) {
  TempDir dir("param-offload");
  const std::string path = dir.file("params.bin");
  OffloadedParams store(kFloats, kOnDisk, kNames, 1, path, 5.0);
  for (int l = 0; l < 5; ++l) store.copy_in(l, values(kFloats[l], 1.0f).data());
  {   // another process writes into the second block's data
    FILE* f = std::fopen(path.c_str(), "r+b");
    ASSERT_NE(f, nullptr);
    std::fseek(f, 4096 + 20480 + 4096 + 100, SEEK_SET);
    std::fputc(0x5a, f);
    std::fclose(f);
  }
  try {
    store.load(2);
    FAIL() << "a corrupt slot was read";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("blocks.1"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("checksum"), std::string::npos) << e.what();
  }
}

namespace {

// A step's plan with the model's, the offload's and the optimizer's ops.
struct OffloadPlan {
  ModelStepOps model;
  ParamOffloadPlanOps params;
  OptimizerStepOps optim;
  PlanBuilder builder;
  std::vector<std::vector<BlockRange>> parts;
  OffloadPlan(std::vector<bool> on_disk, int distance, std::vector<bool> recomputed = {})
      : model(false, std::move(recomputed)), params(on_disk, distance) {
    builder.add_contributor(&model);
    builder.add_contributor(&params);
    builder.add_contributor(&optim);
    parts.assign(on_disk.size(), {BlockRange{}});
  }
  Plan build(int64_t step, int micro_batches) {
    Plan p;
    builder.build({step, static_cast<int>(parts.size()), micro_batches, &parts}, p);
    return p;
  }
};

// Walks a plan in its order, as the worst case of its lanes (a staging op run where it stands:
// a read at its latest freeing nothing a later op frees): every op that touches an offloaded
// layer's parameters finds them loaded, no layer is loaded twice, at most `buffers` are held, and
// every one is freed by the end. Returns the loads per layer.
std::map<int, int> walk(const Plan& plan, const std::vector<bool>& on_disk, int buffers) {
  std::set<int> held;
  std::map<int, int> loads;
  std::set<int> stepped;
  for (const Op& op : plan.ops) {
    SCOPED_TRACE(std::string(to_string(op.kind)) + " of layer " + std::to_string(op.layer) + ", micro " +
                 std::to_string(op.micro));
    const bool disk = op.layer >= 0 && on_disk[static_cast<size_t>(op.layer)];
    switch (op.kind) {
      case OpKind::ParamLoad:
        EXPECT_TRUE(disk);
        EXPECT_TRUE(held.insert(op.layer).second) << "loaded while held";
        EXPECT_LE(static_cast<int>(held.size()), buffers);
        ++loads[op.layer];
        break;
      case OpKind::ParamRelease:
        EXPECT_EQ(held.erase(op.layer), 1u);
        break;
      case OpKind::ParamStore:
        EXPECT_EQ(stepped.count(op.layer), 1u) << "stored before its optimizer step";
        EXPECT_EQ(held.erase(op.layer), 1u);
        break;
      case OpKind::Forward:
      case OpKind::Recompute:
      case OpKind::Backward:
      case OpKind::OptimStep:
        if (!disk) break;
        EXPECT_EQ(held.count(op.layer), 1u) << "not in memory";
        if (op.kind == OpKind::OptimStep) stepped.insert(op.layer);
        break;
      default:
        break;
    }
  }
  EXPECT_TRUE(held.empty()) << held.size() << " layer(s) still held at the step's end";
  return loads;
}

}  // namespace

TEST(ParamOffloadPlanOps, EveryUseFindsItsLayerWithinTheBuffersAndEveryStepWritesBack) {
  const std::vector<bool> on_disk = {false, true, true, true, true, true, false};
  for (int distance : {0, 1, 2, 3, 9}) {
    for (int micro : {1, 3}) {
      SCOPED_TRACE("distance " + std::to_string(distance) + ", micro-batches " + std::to_string(micro));
      OffloadPlan p(on_disk, distance, {false, true, false, true, false, false, false});
      const int buffers = ParamOffloadPlanOps::buffers(distance, 5);
      EXPECT_EQ(buffers, std::min(distance + 1, 5));
      const Plan plan = p.build(4, micro);
      const std::map<int, int> loads = walk(plan, on_disk, buffers);
      int stores = 0;
      for (const Op& op : plan.ops) stores += op.kind == OpKind::ParamStore;
      EXPECT_EQ(stores, 5);
      if (distance == 0 && micro == 1) {
        // Forward 5, backward 4 (the last block is kept from its forward), optimizer 5.
        int total = 0;
        for (const auto& [layer, n] : loads) total += n;
        EXPECT_EQ(total, 14);
      }
    }
  }
}

TEST(ParamOffloadPlanOps, TheModelsAndTheOptimizersOpsWaitForTheirLayersRead) {
  const std::vector<bool> on_disk = {false, true, true, false};
  OffloadPlan p(on_disk, 1);
  const Plan plan = p.build(2, 2);
  std::map<std::pair<int, int>, int> latest_load;   // (layer, micro) -> op
  for (const Op& op : plan.ops) {
    if (op.kind == OpKind::ParamLoad) latest_load[{op.layer, op.micro}] = op.id;
    const bool uses = op.kind == OpKind::Forward || op.kind == OpKind::Backward || op.kind == OpKind::OptimStep;
    if (!uses || !on_disk[static_cast<size_t>(op.layer)]) continue;
    const auto it = latest_load.find({op.layer, op.micro});
    if (it == latest_load.end()) continue;   // kept from an earlier use, which waited for it
    EXPECT_NE(std::find(op.deps.begin(), op.deps.end(), it->second), op.deps.end())
        << to_string(op.kind) << " of layer " << op.layer << " does not wait for its read";
  }
}

// The plan run by the executor on a real store for a few steps, its optimizer step adding 1 to
// every parameter of the layer: a step reads what the one before wrote, on the staging lane.
TEST(ParamOffloadPlanOps, StepsRunByTheExecutorReadWhatTheStepBeforeWrote) {
  TempDir dir("param-offload");
  OffloadedParams store(kFloats, kOnDisk, kNames, ParamOffloadPlanOps::buffers(1, 3), dir.file("params.bin"), 30.0);
  for (int l = 0; l < 5; ++l) store.copy_in(l, values(kFloats[l], 0.0f).data());
  OffloadPlan p(kOnDisk, 1);
  Executor ex;
  ex.bind(OpKind::ParamLoad, [&](const Op& op) { store.load(op.layer); });
  ex.bind(OpKind::ParamRelease, [&](const Op& op) { store.release(op.layer); });
  ex.bind(OpKind::ParamStore, [&](const Op& op) { store.store(op.layer); });
  auto in_memory = [&](const Op& op) {
    return !store.on_disk(op.layer) ? store.resident(op.layer) : store.held(op.layer);
  };
  for (OpKind k : {OpKind::Forward, OpKind::Backward})
    ex.bind(k, [&](const Op& op) { ASSERT_NE(in_memory(op), nullptr) << "layer " << op.layer; });
  ex.bind(OpKind::OptimStep, [&](const Op& op) {
    float* w = in_memory(op);
    ASSERT_NE(w, nullptr);
    for (size_t i = 0; i < kFloats[static_cast<size_t>(op.layer)]; ++i) w[i] += 1.0f;
  });
  for (OpKind k : {OpKind::LoadBatch, OpKind::GradNorm, OpKind::ClipGrads}) ex.bind(k, [](const Op&) {});
  const int steps = 4;
  Plan plan;
  for (int s = 1; s <= steps; ++s) {
    plan = p.build(s, 2);
    ex.run(plan);
  }
  for (int l = 0; l < 5; ++l) {
    std::vector<float> out(kFloats[l]);
    store.copy_out(l, out.data());
    EXPECT_EQ(out, values(kFloats[l], static_cast<float>(steps))) << kNames[l];
  }
}
