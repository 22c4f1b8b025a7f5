#pragma once
// Per-thread scratch of the block computations, so that temporaries cost one block's worth per
// thread instead of one per block. Slot `slot` of the calling thread grows to the largest
// request and never shrinks (allocation happens in the first steps only). The memory is valid
// until the same thread asks for the same slot again; contents are not preserved across calls.
#include <cstddef>

namespace asteria {

// Slots 0-3: the algorithms' temporaries; 4, 5: the block backend's gradient and direction
// (BlockBackend::kGradientSlot, kDirectionSlot).
constexpr int kThreadScratchSlots = 6;
float* thread_scratch(int slot, size_t count);

}  // namespace asteria
