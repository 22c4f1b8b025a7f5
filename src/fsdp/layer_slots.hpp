#pragma once
// A fixed pool of whole-layer buffers for sharded training (docs/DESIGN.md "FSDP"): the gathered
// parameters of the few layers in flight, or the gradients of the few layers whose backward
// has run and whose reduce-scatter has not. Allocated once (every buffer as large as the
// largest layer); a step only hands buffers out and takes them back.
//
// acquire() and release() are called from different lanes (a gather on the comm lane takes a
// buffer that a release on the compute lane gave back), so acquire() blocks while every buffer
// is held. The plan sizes the pool so that a buffer always frees without the waiter's help
// (sharding_plan_ops.hpp); should one not free within timeout_s, acquire() fails naming the
// layer instead of hanging.
//
// The buffers are host memory, or a backend's device memory (the CUDA backend's sharded runs:
// fsdp/device_shards.hpp), which only that backend's copies and ops may touch.
#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <string>
#include <vector>

#include "core/backend.hpp"
#include "core/buffer.hpp"

namespace asteria {

class LayerSlots {
 public:
  // what: what the buffers hold, for messages ("parameter", "gradient"). device: allocate them
  // in its Device memory (null: host memory). alignment (host memory): of the pool, a power of
  // two >= 64; with 4096 and floats_per_slot a multiple of 1024 every buffer suits direct I/O.
  LayerSlots(std::string what, int slots, size_t floats_per_slot, double timeout_s, Backend* device = nullptr,
             size_t alignment = 64);

  // A buffer for layer `layer`, held until release(layer). Its contents are whatever its last
  // holder left. The layer must not hold one already.
  float* acquire(int layer, const std::string& layer_name);
  void release(int layer);
  // The buffer layer `layer` holds, or null.
  float* held_by(int layer) const;

  size_t bytes() const { return holder_.size() * floats_per_slot_ * sizeof(float); }
  // The most buffers held at once since the last call (for reports).
  int take_peak_held();

 private:
  std::string what_;
  size_t floats_per_slot_;
  double timeout_s_;
  Buffer<float> host_;         // host memory, or
  BackendBuffer device_;       // the device's
  float* memory_;
  mutable std::mutex mu_;
  std::condition_variable freed_;
  std::vector<int> holder_;   // per buffer: the layer holding it, or -1
  int held_ = 0, peak_held_ = 0;
};

}  // namespace asteria
