#pragma once
// The tiered state manager (docs/DESIGN.md "Runtime subsystems"): owns the memory of every optimizer
// state tensor in three tiers and moves states between them as the plan says.
//   device  one arena of the backend's Device memory (GPU memory on CUDA, host memory on the
//           CPU backend, so the accounting and moves run everywhere): the states homed there,
//           then the cache region for visiting states;
//   host    one arena of the backend's PinnedHost memory: the states homed there;
//   disk    one file per process (DiskTierFile: direct I/O, checksummed slots), read and
//           written through a pinned bounce buffer when device memory is not host memory.
// Construction binds the optimizer's state tensors (those of the optimizer that steps in the
// backend's device memory): device-homed ones to their place in the device arena for good, the
// others to nothing until a tier_prefetch loads them (using one that is not loaded fails
// loudly). The planner (tier_planner.hpp) decides every move at plan time; the staging-lane
// handlers replay them, copying on the manager's own low-priority stream and returning once
// the copies are done (the plan's tier_wait is then the event the optimizer step waits for);
// the residency check makes the executor refuse any op that would touch a layer's optimizer
// state (the op's part of the layer, when the layout moves it in parts) while part of it is not
// on the device.
#include <array>
#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "core/backend.hpp"
#include "core/step_metrics.hpp"
#include "optim/optimizer.hpp"
#include "runtime/disk_tier_file.hpp"
#include "runtime/executor.hpp"
#include "runtime/tier_layout.hpp"
#include "runtime/tier_planner.hpp"

namespace asteria {

struct TierStats {
  std::array<size_t, kNumTiers> resident{};   // bytes held per tier (page-rounded slots)
  size_t device_peak = 0;                      // most device bytes held at once since the last take
  size_t host_to_device = 0, device_to_host = 0, disk_to_device = 0, device_to_disk = 0;   // moved
};

class TierManager {
 public:
  // opt.layer_states(l) must list the states of layout.by_layer[l], in order (checked).
  // disk_file: the path of the disk tier's file (created only when some state lives on disk).
  // backend: where the device and host arenas are allocated and copied (it outlives this).
  TierManager(TierLayout layout, Optimizer& opt, const std::string& disk_file, Backend& backend);

  const TierLayout& layout() const { return layout_; }
  TierPlanner& planner() { return planner_; }
  // Installs the tier ops' handlers and the residency check.
  void bind(Executor& ex);

  // The counters since the last call; also re-derives the device bytes from which state
  // tensors are bound and asserts they agree with the moves' accounting and the budget.
  TierStats take_stats();
  // The step's tier figures (tier_bytes, tier_moved_bytes, tier_stall_s, ...; rank 0's in the
  // record), taken from take_stats and the executor's times of the tier ops (tier_metrics.cpp).
  void record_metrics(StepMetrics& metrics, const Executor& executor);
  // Whether every state of the layer (of all its units) is on the device.
  bool layer_resident(int layer) const;
  // Checkpoints: the contents of state `id` (layout().states order) wherever it lives now, and
  // back, from and into host memory. Between steps, or on the staging lane (no tier op in
  // flight); the disk tier's checksums apply.
  void copy_out(int id, float* dst);
  void copy_in(int id, const float* src);
  // Where state `id` can be read in host memory now (its device copy when device memory is host
  // memory, or its host home), or nullptr (then copy_out).
  const float* memory_of(int id);
  const DiskTierFile* disk() const { return disk_.get(); }

  // Re-placement under memory pressure (train/placement_watch.hpp), between steps (no tier op
  // in flight): every state moves to where `next` homes it (the same states in the same order,
  // other budgets), its bits unchanged. The states in memory are first written to `spill_file`
  // and the arenas freed, so the process never holds the old and the new arenas at once; then
  // the new arenas are allocated and every state read into its new home (`disk_file`: the new
  // disk tier's file, a path other than the current one's). The device cache starts empty.
  // Returns "" when done; why not, with everything as it was, when the disk has no room for
  // the spill and the new file or the spill cannot be written. Later failures throw.
  std::string relayout(TierLayout next, const std::string& disk_file, const std::string& spill_file);

 private:
  void run_moves(const std::vector<TierMove>& moves);
  // Binds the states to the layout's device homes (the rest to nothing) and resets the counts.
  void bind_homes();
  // Every state visiting the device cache written back to its home tier and unbound.
  void evict_visitors();
  uint8_t* device_at(size_t offset) { return device_.data() + offset; }
  // A copy between a device address and host memory (either way), complete on return.
  void device_copy(void* dst, const void* src, size_t bytes);
  // The disk tier's slot of state `id` into / from device memory at `dev`.
  void disk_to_device(int id, uint8_t* dev);
  bool device_to_disk(int id, const uint8_t* dev);

  TierLayout layout_;
  Backend& backend_;
  const bool device_is_host_;
  std::unique_ptr<Stream> stream_;   // the copies' (low priority); null when device memory is host memory
  std::vector<StateTensor*> tensors_;   // per state id
  BackendBuffer device_, host_;
  std::unique_ptr<DiskTierFile> disk_;
  TierPlanner planner_;
  std::unique_ptr<std::atomic<int>[]> missing_;   // per unit: states not on the device
  std::vector<std::vector<int>> units_of_;        // per state: the units that need it
  // Written by the staging lane; read by take_stats() after the executor finished the plan.
  size_t device_used_ = 0, device_peak_ = 0;
  TierStats moved_;
  // Pinned, page-aligned, as large as the largest disk-homed state: the disk tier's I/O of
  // device memory that is not host memory, and the checkpoint copies of disk-homed states.
  BackendBuffer bounce_;
};

}  // namespace asteria
