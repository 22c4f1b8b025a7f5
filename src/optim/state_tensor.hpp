#pragma once
// An optimizer state tensor: named, sized, with a lifecycle class, and memory bound by whoever
// manages it: the tiered state manager (runtime/tier_manager.hpp) or the optimizer itself
// (OwnedStateMemory, when nothing manages it). Every state starts as zeros.
//
// data() of an unbound tensor (evicted from the device tier, or never bound) fails loudly:
// touching state that is not resident is a bug, never a silent read of stale memory.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/buffer.hpp"
#include "core/error.hpp"
#include "optim/block_range.hpp"

namespace asteria {

// Lifecycle classes (docs/DESIGN.md "Tiers"): hot state is written every step (factor statistics,
// moments); warm state is read every step and written every F steps (inverse roots,
// eigenbases); cold state is rarely touched (what does not fit elsewhere).
enum class StateClass : uint8_t { Hot, Warm, Cold };
constexpr int kNumStateClasses = 3;
const char* to_string(StateClass);

struct StateSpec {
  std::string name;       // "blocks.0.att_qkv[1]: rows 256-511, cols 0-255 / L"
  size_t count = 0;       // floats
  StateClass cls = StateClass::Hot;
  std::vector<int64_t> shape;   // its shape when it is one tensor (block state); {} otherwise
  // A state without a shape belongs to the layer's steps: every part's (whole()), or, for a
  // band of the update compensation, those of the blocks it serves (runtime/tier_layout.hpp).
  BlockRange blocks;
  size_t bytes() const { return count * sizeof(float); }
  bool operator==(const StateSpec&) const = default;
};

class StateTensor {
 public:
  explicit StateTensor(StateSpec spec) : spec_(std::move(spec)) {}

  float* data() {
    ASTERIA_ASSERT(ptr_, "optimizer state '", spec_.name, "' is used while not resident");
    return ptr_;
  }
  const float* data() const {
    ASTERIA_ASSERT(ptr_, "optimizer state '", spec_.name, "' is used while not resident");
    return ptr_;
  }
  float& operator[](size_t i) { return ptr_[i]; }
  const float& operator[](size_t i) const { return ptr_[i]; }
  size_t size() const { return spec_.count; }
  const StateSpec& spec() const { return spec_; }

  // The memory manager's side: point at (at least size()) floats, or nullptr when evicted.
  void bind(float* p) { ptr_ = p; }
  bool bound() const { return ptr_ != nullptr; }

 private:
  StateSpec spec_;
  float* ptr_ = nullptr;
};

// Memory for state tensors that nothing else manages: one zeroed, 64-byte aligned buffer.
class OwnedStateMemory {
 public:
  void bind(const std::vector<StateTensor*>& states);

 private:
  Buffer<float> memory_;
};

}  // namespace asteria
