// The tiered state manager (runtime/tier_manager.hpp) on two backends: the CPU's (device memory
// is host memory) and one whose device memory is not host memory (the CUDA backend's case,
// which cannot run here): there every byte of device memory is stored scrambled, so only the
// backend's own copies read or write it correctly. The same steps of plans with moves through
// all three tiers must leave the same state on both, and every byte that reached device memory
// must have gone through the backend's copies.
#include <gtest/gtest.h>

#include <array>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "core/backend.hpp"
#include "core/error.hpp"
#include "runtime/executor.hpp"
#include "runtime/plan_builder.hpp"
#include "runtime/tier_manager.hpp"
#include "runtime/tier_planner.hpp"
#include "train/step_plan.hpp"
#include "../core/scrambled_device_backend.hpp"
#include "../integration/test_util.hpp"

using namespace asteria;
using asteria::test_support::ScrambledDeviceBackend;

namespace {

constexpr int kLayers = 4;

// Per layer: one hot state (homed on the device while it fits) and two warm ones of different
// sizes (never homed on the device: they visit its cache from the host tier or the disk).
std::vector<std::vector<StateSpec>> state_specs() {
  std::vector<std::vector<StateSpec>> s(kLayers);
  for (int l = 0; l < kLayers; ++l) {
    const std::string p = "l" + std::to_string(l) + ".";
    s[l] = {{p + "hot", 1000 + 10u * l, StateClass::Hot, {}, {}}, {p + "warm_a", 3000, StateClass::Warm, {}, {}},
            {p + "warm_b", 1500 + 700u * l, StateClass::Warm, {}, {}}};
  }
  return s;
}

// Budgets that put states in every tier: the device holds some hot homes and the cache for the
// layers in flight, the host a few warm states, the disk the rest.
TierLayout three_tier_layout() {
  TierOptions o;
  o.budget = {20 * kTierPage, 6 * kTierPage, kUnbounded};
  o.prefetch_distance = 1;
  return place_and_plan_states(state_specs(), o);
}

// An optimizer with only state: what the tier manager binds.
class StateOnlyOptimizer final : public Optimizer {
 public:
  StateOnlyOptimizer() {
    for (const std::vector<StateSpec>& layer : state_specs()) {
      layers_.emplace_back();
      for (const StateSpec& s : layer) layers_.back().emplace_back(s);
    }
  }
  void step_layer(int, float*, const float*, float, double, int64_t) override { fail("not used"); }
  size_t state_bytes() const override { return 0; }
  std::vector<StateTensor*> layer_states(int layer) override {
    std::vector<StateTensor*> out;
    for (StateTensor& t : layers_[layer]) out.push_back(&t);
    return out;
  }
  std::vector<std::vector<StatePiece>> state_pieces(int) const override { return {}; }

 private:
  std::vector<std::vector<StateTensor>> layers_;
};

float initial(int id, size_t i) { return static_cast<float>(id * 1000 + static_cast<int>(i % 97)); }


// A tier manager over the StateOnlyOptimizer with a plan whose optim_step(l) adds l + 1 to each
// of layer l's states (reading and writing them through the backend, as a device step would).
// Every state starts as initial(id, i), filled through copy_in.
struct SteppedTiers {
  Backend& backend;
  StateOnlyOptimizer opt;
  TierManager tiers;
  Executor ex;
  std::unique_ptr<Stream> stream;
  std::vector<float> scratch;
  ModelStepOps model_ops{false};
  OptimizerStepOps optim_ops;
  PlanBuilder builder;
  Plan plan;
  int step = 0;

  SteppedTiers(Backend& b, TierLayout layout, const std::string& disk_file)
      : backend(b), tiers(std::move(layout), opt, disk_file, b), stream(b.create_stream(StreamPriority::Normal)) {
    const TierLayout& l = tiers.layout();
    for (size_t id = 0; id < l.states.size(); ++id) {
      std::vector<float> v(l.states[id].spec.count);
      for (size_t i = 0; i < v.size(); ++i) v[i] = initial(static_cast<int>(id), i);
      tiers.copy_in(static_cast<int>(id), v.data());
    }
    for (int k = 0; k < kNumOpKinds; ++k) ex.bind(static_cast<OpKind>(k), [](const Op&) {});
    tiers.bind(ex);
    ex.bind(OpKind::OptimStep, [this](const Op& op) {
      for (StateTensor* t : opt.layer_states(op.layer)) {
        scratch.resize(t->size());
        backend.copy(scratch.data(), t->data(), t->size() * sizeof(float), *stream);
        stream->synchronize();
        for (float& x : scratch) x += static_cast<float>(op.layer + 1);
        backend.copy(t->data(), scratch.data(), t->size() * sizeof(float), *stream);
        stream->synchronize();
      }
    });
    builder.add_contributor(&model_ops);
    builder.add_contributor(&tiers.planner());
    builder.add_contributor(&optim_ops);
    tiers.take_stats();
  }
  TierStats run_step() {
    builder.build({++step, kLayers, 1}, plan);
    ex.run(plan);
    return tiers.take_stats();
  }
  std::vector<std::vector<float>> read_all() {
    std::vector<std::vector<float>> out;
    for (size_t id = 0; id < tiers.layout().states.size(); ++id) {
      out.emplace_back(tiers.layout().states[id].spec.count);
      tiers.copy_out(static_cast<int>(id), out.back().data());
    }
    return out;
  }
  // Every state as `step` steps leave it.
  void expect_stepped(const std::string& when) {
    const std::vector<std::vector<float>> state = read_all();
    for (size_t id = 0; id < state.size(); ++id) {
      const int layer = tiers.layout().states[id].layer;
      for (size_t i = 0; i < state[id].size(); ++i)
        ASSERT_EQ(state[id][i], initial(static_cast<int>(id), i) + step * (layer + 1))
            << tiers.layout().states[id].spec.name << "[" << i << "] " << when;
    }
  }
};

struct Outcome {
  std::vector<std::vector<float>> state;   // per state id, read back with copy_out
  std::vector<TierStats> stats;            // per step
};

Outcome run_steps(Backend& backend, int steps, const std::string& disk_file) {
  SteppedTiers run(backend, three_tier_layout(), disk_file);
  Outcome out;
  for (int step = 1; step <= steps; ++step) out.stats.push_back(run.run_step());
  out.state = run.read_all();
  return out;
}

TEST(TierManager, LayoutUsesEveryTier) {
  const TierLayout layout = three_tier_layout();
  std::array<int, kNumTiers> homes{};
  for (const TierState& s : layout.states) ++homes[static_cast<int>(s.home)];
  EXPECT_GT(homes[0], 0);
  EXPECT_GT(homes[1], 0);
  EXPECT_GT(homes[2], 0);
  EXPECT_TRUE(layout.moves());
}

TEST(TierManager, DeviceMemoryThatIsNotHostMemoryGivesTheCpuBackendsStateAfterEveryMove) {
  asteria::testing::TempDir cpu_dir("tier-cpu"), dev_dir("tier-dev");
  std::unique_ptr<Backend> cpu = make_cpu_backend();
  ScrambledDeviceBackend dev;
  const int steps = 3;
  const Outcome on_cpu = run_steps(*cpu, steps, cpu_dir.file("state.bin"));
  const Outcome on_dev = run_steps(dev, steps, dev_dir.file("state.bin"));

  const TierLayout layout = three_tier_layout();
  for (size_t id = 0; id < layout.states.size(); ++id) {
    const int layer = layout.states[id].layer;
    for (size_t i = 0; i < on_cpu.state[id].size(); ++i) {
      ASSERT_EQ(on_cpu.state[id][i], initial(static_cast<int>(id), i) + steps * (layer + 1))
          << layout.states[id].spec.name << "[" << i << "] on the CPU backend";
      ASSERT_EQ(on_dev.state[id][i], on_cpu.state[id][i]) << layout.states[id].spec.name << "[" << i << "]";
    }
  }
  // The same moves, byte for byte, and in all four directions.
  for (int s = 0; s < steps; ++s) {
    const TierStats &a = on_cpu.stats[s], &b = on_dev.stats[s];
    EXPECT_EQ(a.host_to_device, b.host_to_device);
    EXPECT_EQ(a.device_to_host, b.device_to_host);
    EXPECT_EQ(a.disk_to_device, b.disk_to_device);
    EXPECT_EQ(a.device_to_disk, b.device_to_disk);
    EXPECT_EQ(a.device_peak, b.device_peak);
    EXPECT_GT(b.host_to_device, 0u);
    EXPECT_GT(b.disk_to_device, 0u);
    EXPECT_GT(b.device_to_host, 0u);
  }
  // The arenas are the backend's memory of each kind, and the copies ran on a low-priority
  // stream of the manager's own (besides the test's one).
  EXPECT_EQ(dev.allocated[MemoryKind::Device], layout.device_home_bytes + layout.device_cache_bytes);
  EXPECT_GE(dev.allocated[MemoryKind::PinnedHost], layout.host_bytes);
  EXPECT_EQ(dev.streams[StreamPriority::Low], 1);
  EXPECT_GT(dev.to_device_bytes, 0u);
}

TEST(TierManager, MemoryOfIsNeverDeviceMemoryTheHostCannotRead) {
  asteria::testing::TempDir dir("tier-memory");
  ScrambledDeviceBackend dev;
  std::unique_ptr<Backend> cpu = make_cpu_backend();
  for (Backend* backend : {static_cast<Backend*>(&dev), cpu.get()}) {
    StateOnlyOptimizer opt;
    TierManager tiers(three_tier_layout(), opt, dir.file("state.bin"), *backend);
    const TierLayout& layout = tiers.layout();
    for (size_t id = 0; id < layout.states.size(); ++id) {
      std::vector<float> v(layout.states[id].spec.count);
      for (size_t i = 0; i < v.size(); ++i) v[i] = initial(static_cast<int>(id), i);
      tiers.copy_in(static_cast<int>(id), v.data());
      const float* p = tiers.memory_of(static_cast<int>(id));
      const Tier home = layout.states[id].home;
      if (home == Tier::Disk) {
        EXPECT_EQ(p, nullptr);
      } else if (home == Tier::Device && backend == &dev) {
        EXPECT_EQ(p, nullptr) << layout.states[id].spec.name << " is device memory";
      } else {
        ASSERT_NE(p, nullptr) << layout.states[id].spec.name;
        for (size_t i = 0; i < v.size(); ++i) ASSERT_EQ(p[i], v[i]) << layout.states[id].spec.name << "[" << i << "]";
      }
    }
  }
}

TEST(TierManager, RelayoutBetweenStepsMovesEveryStateAndKeepsItsBits) {
  asteria::testing::TempDir dir("tier-relayout");
  ScrambledDeviceBackend dev;
  std::unique_ptr<Backend> cpu = make_cpu_backend();
  TierOptions all_in_memory, all_on_disk;
  all_on_disk.budget = {0, 0, kUnbounded};
  all_on_disk.prefetch_distance = 0;
  all_on_disk.budget[0] = tier_cache_need(state_specs(), 0);
  for (Backend* backend : {static_cast<Backend*>(&dev), cpu.get()}) {
    SCOPED_TRACE(backend->name());
    SteppedTiers run(*backend, three_tier_layout(), dir.file("state.bin"));
    run.run_step();
    run.run_step();   // the cache holds visitors from the last step
    ASSERT_EQ(run.tiers.relayout(place_and_plan_states(state_specs(), all_in_memory), dir.file("state.1.bin"),
                                 dir.file("spill.bin")), "");
    EXPECT_EQ(run.tiers.disk(), nullptr);
    EXPECT_FALSE(run.tiers.layout().moves());
    EXPECT_FALSE(std::filesystem::exists(dir.file("state.bin")));
    EXPECT_FALSE(std::filesystem::exists(dir.file("spill.bin")));
    run.expect_stepped("after moving all into memory");
    const TierStats in_memory = run.run_step();
    EXPECT_EQ(in_memory.disk_to_device + in_memory.host_to_device, 0u);
    // A spill that cannot be written (a file is where its directory should be) changes nothing.
    std::ofstream(dir.file("blocker")) << "not a directory";
    EXPECT_NE(run.tiers.relayout(three_tier_layout(), dir.file("state.x.bin"), dir.file("blocker/spill.bin")), "");
    EXPECT_FALSE(run.tiers.layout().moves());
    run.run_step();
    run.expect_stepped("after a relayout that failed");
    ASSERT_EQ(run.tiers.relayout(place_and_plan_states(state_specs(), all_on_disk), dir.file("state.2.bin"),
                                 dir.file("spill.bin")), "");
    ASSERT_NE(run.tiers.disk(), nullptr);
    EXPECT_EQ(run.tiers.disk()->path(), dir.file("state.2.bin"));
    run.expect_stepped("after moving all to disk");
    const TierStats on_disk = run.run_step();
    EXPECT_GT(on_disk.disk_to_device, 0u);
    EXPECT_LE(on_disk.device_peak, all_on_disk.budget[0]);
    ASSERT_EQ(run.tiers.relayout(three_tier_layout(), dir.file("state.3.bin"), dir.file("spill.bin")), "");
    run.run_step();
    run.expect_stepped("back in all three tiers");
  }
}

}  // namespace
