// runtime.placement auto (train/estimates/placement.hpp) as a function of an injected memory
// limit: nothing changes when the run fits; below that the steps are taken in order of cost
// (tier budgets, recompute, head chunk, the shadow pipeline's refreshes in flight, micro-batch),
// each only when the cheaper ones were not enough; the result fits the limit, keeps the global
// batch and every explicitly given key; what cannot fit is refused with the bytes.
#include <gtest/gtest.h>

#include <map>

#include "config/config.hpp"
#include "core/error.hpp"
#include "train/estimates/placement.hpp"
#include "model/model.hpp"
#include "optim/optimizer_factory.hpp"
#include "train/tier_config.hpp"
#include "tier_floor.hpp"

namespace asteria {
namespace {

// A small SOAP model whose parts are all of some size: optimizer state, activations of a
// micro-batch of 8, and shadow refreshes in flight (asteria mode, no warm-up: the pipeline runs from
// step 1).
Config small(std::vector<std::string> sets = {}) {
  std::vector<std::string> all = {"optim.name=soap", "train.steps=100", "train.micro_batch=8", "train.grad_accum=2",
                                  "runtime.mode=asteria", "train.warmup_steps=0", "run.dir=/tmp/placement-test"};
  all.insert(all.end(), sets.begin(), sets.end());
  return load_config_text("model:\n  preset: tiny\n  n_layers: 8\n  d_model: 128\n  mlp_hidden: 512\n", "small.yaml", all);
}

PlacementInputs inputs(uint64_t limit) { return asteria::testing::one_process_inputs(limit); }

double unplaced_need(const Config& c) { return process_memory(c).total(); }

// The order of cost of each part's key.
int rank_of(const std::string& key) {
  static const std::map<std::string, int> order = {
      {"runtime.tiers", 0},        {"train.activation_recompute", 1}, {"model.head_chunk", 2},
      {"runtime.shadow.resident_jobs", 3}, {"runtime.shadow.delay", 4}, {"runtime.shadow.sync_steps", 5},
      {"train.micro_batch", 6}, {"runtime.tiers.params.home", 7}};
  return order.at(key);
}

// Each key in the order it first appears as the limit falls from the unplaced need to where
// nothing fits; checks every placement on the way (it fits, keeps the batch, its parts in order
// of cost, never fewer as the limit falls).
std::vector<std::string> sweep(const Config& c) {
  const double top = unplaced_need(c) / kPlacementFill;
  std::vector<std::string> seen_first_at;
  int failures = 0;
  size_t last_steps = 0;
  for (double limit = top; limit > top / 4 && failures < 2; limit *= 0.96) {
    Placement p;
    try {
      p = choose_placement(c, inputs(static_cast<uint64_t>(limit)));
    } catch (const Error& e) {
      ++failures;
      EXPECT_NE(std::string(e.what()).find("even with all optimizer state on the disk tier"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("small.yaml"), std::string::npos) << e.what();
      continue;
    }
    EXPECT_EQ(failures, 0) << "a limit fitted below one that did not";
    SCOPED_TRACE(p.describe());
    EXPECT_LE(p.need.total(), kPlacementFill * limit);
    EXPECT_EQ(p.cfg.train.micro_batch * p.cfg.train.grad_accum, c.train.micro_batch * c.train.grad_accum);
    for (size_t i = 1; i < p.parts.size(); ++i) EXPECT_LE(rank_of(p.parts[i - 1].key), rank_of(p.parts[i].key));
    EXPECT_GE(p.parts.size(), last_steps);
    last_steps = p.parts.size();
    for (const PlacementPart& part : p.parts)
      if (std::find(seen_first_at.begin(), seen_first_at.end(), part.key) == seen_first_at.end()) seen_first_at.push_back(part.key);
    // The shadow pipeline's delay and warm-up and the micro-batch change the arithmetic; the
    // tiers, recompute, parking the jobs and the parameters on disk never do; the head chunk
    // says for itself.
    bool math = false;
    for (const PlacementPart& part : p.parts) {
      if (part.key != "model.head_chunk") {
        EXPECT_EQ(part.changes_math, rank_of(part.key) >= 4 && part.key != "runtime.tiers.params.home") << part.key;
      }
      math = math || part.changes_math;
    }
    EXPECT_EQ(p.changes_math, math);
  }
  EXPECT_GT(failures, 0) << "the sweep never reached a limit too small to fit";
  return seen_first_at;
}

TEST(Placement, ARunThatFitsIsLeftAsItIs) {
  const Config c = small();
  const Placement p = choose_placement(c, inputs(static_cast<uint64_t>(unplaced_need(c) / kPlacementFill) + (1 << 20)));
  EXPECT_TRUE(p.parts.empty()) << p.describe();
  EXPECT_EQ(config_to_yaml(p.cfg), config_to_yaml(c));
  EXPECT_FALSE(p.changes_math);
}

using asteria::testing::least_with_tiers;

TEST(Placement, TierBudgetsFirstWithMoreInMemoryAsTheLimitGrows) {
  const Config c = small();
  const MemoryEstimate all = process_memory(c);
  const double least = least_with_tiers(c);
  ASSERT_LT(least, 0.9 * all.total());   // the tiers matter for this model
  // Halfway between: the tiers alone make it fit.
  const uint64_t limit = static_cast<uint64_t>((least + all.total()) / 2 / kPlacementFill);
  const Placement p = choose_placement(c, inputs(limit));
  ASSERT_EQ(p.parts.size(), 1u) << p.describe();
  EXPECT_EQ(p.parts[0].key, "runtime.tiers");
  EXPECT_FALSE(p.changes_math);
  EXPECT_LE(p.need.total(), kPlacementFill * static_cast<double>(limit));
  EXPECT_GT(p.need.optimizer_on_disk, 0.0);
  EXPECT_EQ(p.cfg.train.activation_recompute, ActivationRecompute::Mode::None);
  // The budgets read back as the layout the run will have, and a larger limit keeps more in memory.
  const TierLayout layout = configured_tier_layout(p.cfg);
  EXPECT_GT(layout.device_home_bytes, 0u);
  const Placement more = choose_placement(c, inputs(limit + static_cast<uint64_t>((all.total() - least) / 4)));
  EXPECT_LT(more.need.optimizer_on_disk, p.need.optimizer_on_disk) << more.describe();
}

TEST(Placement, StepsAreTakenInOrderOfCostAndTheResultFitsAndKeepsTheBatch) {
  // Every step is taken somewhere in the sweep, in order. The refreshes in flight are parked on
  // the disk tier (the same bits) before anything changes the arithmetic; with them parked a
  // shorter delay saves no memory, so the next step is the synchronous refreshes.
  const std::vector<std::string> expected = {"runtime.tiers", "train.activation_recompute", "model.head_chunk",
                                             "runtime.shadow.resident_jobs", "runtime.shadow.sync_steps",
                                             "train.micro_batch", "runtime.tiers.params.home"};
  EXPECT_EQ(sweep(small()), expected);
}

// runtime.shadow.resident_jobs given as 0 (every refresh in flight in memory): the delay is
// lowered instead.
TEST(Placement, WithTheJobsKeptInMemoryTheDelayIsLoweredFirst) {
  const std::vector<std::string> expected = {"runtime.tiers", "train.activation_recompute", "model.head_chunk",
                                             "runtime.shadow.delay", "runtime.shadow.sync_steps", "train.micro_batch",
                                             "runtime.tiers.params.home"};
  EXPECT_EQ(sweep(small({"runtime.shadow.resident_jobs=0"})), expected);
}

TEST(Placement, GivenKeysAreKeptAndManualChangesNothing) {
  const Config c = small({"runtime.tiers.device.bytes=unlimited", "train.activation_recompute=none"});
  const MemoryEstimate all = process_memory(c);
  const uint64_t limit = static_cast<uint64_t>((least_with_tiers(c) + all.total()) / 2 / kPlacementFill);
  // The budgets are given: the tiers cannot help, so the next steps that may change are taken.
  const Placement p = choose_placement(c, inputs(limit));
  for (const PlacementPart& part : p.parts) {
    EXPECT_NE(part.key, "runtime.tiers");
    EXPECT_NE(part.key, "train.activation_recompute");
  }
  EXPECT_EQ(p.cfg.runtime.tiers.device.bytes, "unlimited");
  EXPECT_EQ(p.cfg.train.activation_recompute, ActivationRecompute::Mode::None);
  EXPECT_FALSE(p.parts.empty());

  const Config manual = small({"runtime.placement=manual"});
  const Placement m = choose_placement(manual, inputs(limit));
  EXPECT_TRUE(m.parts.empty());
  EXPECT_EQ(config_to_yaml(m.cfg), config_to_yaml(manual));
}

TEST(Placement, TheDiskTiersFreeSpaceBounds) {
  const Config c = small();
  const MemoryEstimate all = process_memory(c);
  PlacementInputs in = inputs(static_cast<uint64_t>((least_with_tiers(c) + all.total()) / 2 / kPlacementFill));
  in.disk_free = 4096;   // no room for any state on disk: the next steps must do it
  const Placement p = choose_placement(c, in);
  EXPECT_EQ(p.need.optimizer_on_disk, 0.0) << p.describe();
  EXPECT_NE(p.parts.front().key, "runtime.tiers") << p.describe();
}

// runtime.backend cuda: the GPU's free memory (injected) bounds what the run keeps there; the
// optimizer state it cannot hold goes to pinned host memory (plenty here), not to disk; a GPU too
// small for the parameters, gradients and activations is refused naming its free bytes.
TEST(Placement, OnCudaTheGpusFreeMemoryBoundsTheDeviceTierAndTheRestGoesToHostMemory) {
  const Config c = small({"runtime.backend=cuda"});
  Config all = c;
  all.runtime.tiers.device.bytes = all.runtime.tiers.host.bytes = "unlimited";
  const MemoryEstimate on_gpu = device_memory(all);
  ASSERT_GT(on_gpu.optimizer, 0.0);
  PlacementInputs in = inputs(uint64_t{1} << 40);
  in.device_estimate = [](const Config& x, TierCheck check) { return device_memory(x, check); };
  in.device_free = static_cast<uint64_t>((on_gpu.total() - on_gpu.optimizer / 2) / kPlacementFill);
  const Placement p = choose_placement(c, in);
  ASSERT_FALSE(p.parts.empty());
  EXPECT_EQ(p.parts.front().key, "runtime.tiers") << p.describe();
  EXPECT_FALSE(p.changes_math) << p.describe();
  EXPECT_LE(device_memory(p.cfg).total(), kPlacementFill * static_cast<double>(*in.device_free)) << p.describe();
  EXPECT_GT(parse_byte_size(p.cfg.runtime.tiers.host.bytes), 0u) << p.describe();
  EXPECT_EQ(p.need.optimizer_on_disk, 0.0) << p.describe();
  // Without the device's reading the GPU is not planned for (the startup check decides).
  EXPECT_TRUE(choose_placement(c, inputs(uint64_t{1} << 40)).parts.empty());

  in.device_free = static_cast<uint64_t>((on_gpu.params + on_gpu.grads) / 2);
  try {
    choose_placement(c, in);
    ADD_FAILURE() << "a GPU without room for the parameters was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("of GPU memory even with the least optimizer state on the device"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("free (cudaMemGetInfo"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace asteria
