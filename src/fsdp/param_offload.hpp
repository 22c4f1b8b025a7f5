#pragma once
// Parameters on the disk tier (runtime.tiers.params.home disk; docs/DESIGN.md "Parameters on the
// disk tier"), as ZeRO-Infinity offloads parameters: the fp32 parameters of the offloaded layers
// (the blocks) live in a file of their own beside the disk tier's (runtime/disk_tier_file.hpp:
// direct I/O, one checksummed slot per layer), and such a layer is in memory only while it is in
// flight, in one of a fixed pool of whole-layer buffers (fsdp/layer_slots.hpp, aligned for direct
// I/O), as a sharded run's gathered layers are. The other layers (the embedding and the head,
// which every micro-batch's first and last ops read) keep buffers of their own for the whole run.
// Nothing computes differently: a read gives back the floats last written, bit for bit (the
// checksums say so), so a run has the same bits with its parameters in memory or here.
//
// In a step (fsdp/param_offload_plan_ops.hpp places the ops):
//   load(l)      staging lane: a buffer from the pool, layer l's slot read into it
//   release(l)   compute lane: the buffer back to the pool, unwritten (after a forward, a backward)
//   store(l)     staging lane, after the layer's optimizer step: the buffer written to l's slot
//                (skipped where the data equals the slot's), then back to the pool
// The plan sizes the pool so that a load never waits for a buffer; one that does waits up to
// timeout_s, then fails naming the layer.
//
// Between steps (every lane idle) or on the staging lane (the checkpoint's copy, before the
// step's loads), copy_out and copy_in move a layer's parameters wherever they live from and into
// host memory (an offloaded layer's through a buffer of the pool, free at those times). The disk
// I/O is one thread's at a time: the staging lane's in a step.
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "core/buffer.hpp"
#include "fsdp/layer_slots.hpp"
#include "runtime/disk_tier_file.hpp"

namespace asteria {

// The bytes parameters take with some layers on the disk tier: in memory (the layers kept there
// and the pool of `buffers` whole-layer buffers, each as large as the largest offloaded layer,
// page-rounded) and in the disk tier's file (a header page and the page-rounded data per layer).
struct ParamOffloadBytes {
  size_t in_memory = 0, on_disk = 0;
};
ParamOffloadBytes param_offload_bytes(const std::vector<size_t>& floats, const std::vector<bool>& on_disk, int buffers);

class OffloadedParams {
 public:
  // floats: every layer's parameter count; on_disk: the layers that live on the disk tier;
  // names: the layers', for messages; buffers: the pool's size (>= 1); path: the file (created
  // here, removed by the destructor). Every layer starts as zeros: the caller fills them
  // (copy_in) before the first step.
  OffloadedParams(std::vector<size_t> floats, std::vector<bool> on_disk, std::vector<std::string> names, int buffers,
                  const std::string& path, double timeout_s);
  ~OffloadedParams();

  int num_layers() const { return static_cast<int>(floats_.size()); }
  bool on_disk(int l) const { return on_disk_[l]; }
  size_t floats(int l) const { return floats_[l]; }
  // A layer kept in memory: its buffer, for the whole run; null for an offloaded one.
  float* resident(int l) { return on_disk_[l] ? nullptr : resident_[l].data(); }
  // An offloaded layer's buffer while it is held (loaded, not yet released or stored), else null.
  float* held(int l) const { return on_disk_[l] ? slots_->held_by(l) : nullptr; }

  float* load(int l);
  void release(int l);
  void store(int l);

  void copy_out(int l, float* dst);
  void copy_in(int l, const float* src);

  ParamOffloadBytes bytes() const { return param_offload_bytes(floats_, on_disk_, buffers_); }
  const std::string& path() const { return file_->path(); }
  // Bytes read from and written to the file since the last call (the staging lane's, read after
  // the step's plan ran).
  struct Traffic {
    size_t read = 0, written = 0;
  };
  Traffic take_traffic();

 private:
  void check_offloaded(int l, const char* what) const;

  std::vector<size_t> floats_;
  std::vector<bool> on_disk_;
  std::vector<std::string> names_;
  int buffers_;
  std::vector<Buffer<float>> resident_;   // per layer kept in memory (empty for offloaded ones)
  std::vector<size_t> offset_;            // per offloaded layer: its slot in the file
  std::unique_ptr<LayerSlots> slots_;
  std::unique_ptr<DiskTierFile> file_;
  Traffic traffic_;
};

}  // namespace asteria
