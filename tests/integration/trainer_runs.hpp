#pragma once
// Helpers for integration tests that train and compare the resulting parameters.
#include <cstring>
#include <string>
#include <vector>

#include "test_util.hpp"
#include "config/config.hpp"
#include "train/tier_config.hpp"
#include "train/trainer.hpp"

namespace asteria::testing {

// Overrides for a short second-order run on dir/train.bin (512 ids) writing into dir/run: a
// refresh every 3 steps from step 2, so a few steps exercise roots, bases and their schedule.
inline std::vector<std::string> short_second_order_sets(const TempDir& dir, const std::string& optimizer,
                                                        int steps) {
  return {"data.train=" + dir.file("train.bin"),
          "run.dir=" + dir.file("run"),
          "run.overwrite=true",
          "train.steps=" + std::to_string(steps),
          "train.micro_batch=4",
          "train.warmup_steps=2",
          "optim.name=" + optimizer,
          "optim.lr=1e-2",
          "optim.precondition_frequency=3",
          "optim.start_preconditioning_step=2",
          "optim.root_eps=1e-8",
          "optim.kl_init_factor=1e-3"};
}

// Tier budgets that put a quarter of cfg's optimizer state on the host and the rest on disk:
// the device holds the largest layer's state (prefetch distance 0: one layer in flight), the
// host a quarter of all of it. `total_out` / `device_out` receive the in-memory total and the
// device budget.
inline std::vector<std::string> quarter_host_rest_disk(const Config& cfg, size_t* total_out = nullptr,
                                                       size_t* device_out = nullptr) {
  const TierLayout in_memory = configured_tier_layout(cfg);
  size_t total = 0, largest_layer = 0;
  for (const auto& ids : in_memory.by_layer) {
    size_t layer = 0;
    for (int id : ids) layer += in_memory.states[id].slot;
    largest_layer = std::max(largest_layer, layer);
    total += layer;
  }
  if (total_out) *total_out = total;
  if (device_out) *device_out = largest_layer;
  return {"runtime.tiers.device.bytes=" + std::to_string(largest_layer),
          "runtime.tiers.host.bytes=" + std::to_string(total / 4), "runtime.tiers.prefetch_distance=0"};
}

// Trains `cfg` and returns the final parameters of all layers, concatenated. memory: the limit
// runtime.placement auto reads (empty: the machine's); world: the ranks' (null: one process).
inline std::vector<float> train_params(const Config& cfg, MemoryWatch memory = {}, Communicator* world = nullptr) {
  Trainer t(cfg, world, std::move(memory));
  t.run();
  std::vector<float> all;
  for (int l = 0; l < t.num_layers(); ++l) {
    const std::vector<float> p = t.final_params(l);
    all.insert(all.end(), p.begin(), p.end());
  }
  return all;
}

inline bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace asteria::testing
