#include "fsdp/layer_slots.hpp"

#include <algorithm>
#include <chrono>

#include "core/error.hpp"

namespace asteria {

LayerSlots::LayerSlots(std::string what, int slots, size_t floats_per_slot, double timeout_s, Backend* device,
                       size_t alignment)
    : what_(std::move(what)), floats_per_slot_(floats_per_slot), timeout_s_(timeout_s), holder_(static_cast<size_t>(slots), -1) {
  ASTERIA_ASSERT(slots >= 1);
  const size_t floats = static_cast<size_t>(slots) * floats_per_slot;
  if (device) {
    device_ = BackendBuffer(*device, floats * sizeof(float), MemoryKind::Device);
    memory_ = reinterpret_cast<float*>(device_.data());
  } else {
    host_.resize(floats, alignment);
    memory_ = host_.data();
  }
}

float* LayerSlots::acquire(int layer, const std::string& layer_name) {
  std::unique_lock<std::mutex> lock(mu_);
  ASTERIA_ASSERT(std::find(holder_.begin(), holder_.end(), layer) == holder_.end(), what_, " buffer of ",
                 layer_name, " acquired twice");
  const auto free_slot = [&] { return std::find(holder_.begin(), holder_.end(), -1); };
  const bool got = freed_.wait_for(lock, std::chrono::duration<double>(timeout_s_), [&] { return free_slot() != holder_.end(); });
  ASTERIA_CHECK(got, "no ", what_, " buffer freed within distributed.timeout_s (", timeout_s_, " s) for ", layer_name,
                ": all ", holder_.size(), " are held (a stalled lane?)");
  const auto it = free_slot();
  *it = layer;
  peak_held_ = std::max(peak_held_, ++held_);
  return memory_ + static_cast<size_t>(it - holder_.begin()) * floats_per_slot_;
}

void LayerSlots::release(int layer) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    const auto it = std::find(holder_.begin(), holder_.end(), layer);
    ASTERIA_ASSERT(it != holder_.end(), what_, " buffer of layer ", layer, " released but not held");
    *it = -1;
    --held_;
  }
  freed_.notify_all();
}

float* LayerSlots::held_by(int layer) const {
  std::lock_guard<std::mutex> lock(mu_);
  const auto it = std::find(holder_.begin(), holder_.end(), layer);
  return it == holder_.end() ? nullptr
                             : memory_ + static_cast<size_t>(it - holder_.begin()) * floats_per_slot_;
}

int LayerSlots::take_peak_held() {
  std::lock_guard<std::mutex> lock(mu_);
  const int p = peak_held_;
  peak_held_ = held_;
  return p;
}

}  // namespace asteria
