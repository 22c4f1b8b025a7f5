#include "optim/thread_scratch.hpp"

#include <array>

#include "core/buffer.hpp"
#include "core/error.hpp"

namespace asteria {

float* thread_scratch(int slot, size_t count) {
  static thread_local std::array<Buffer<float>, kThreadScratchSlots> slots;
  ASTERIA_ASSERT(slot >= 0 && slot < kThreadScratchSlots, "scratch slot ", slot);
  Buffer<float>& b = slots[slot];
  if (b.size() < count) b.resize(count);
  return b.data();
}

}  // namespace asteria
