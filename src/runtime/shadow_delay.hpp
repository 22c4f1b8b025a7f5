#pragma once
// The publish delay of the shadow pipeline as a pure function of the step a refresh is opened
// at (runtime.shadow.delay and runtime.shadow.sync_steps): refreshes opened while
// t <= sync_steps publish at once (D = 0), later ones D steps later. The factors move fastest
// early in training, where a basis D steps old costs the most loss.
#include <cstdint>

namespace asteria {

struct ShadowDelay {
  int64_t delay = 0;        // D
  int64_t sync_steps = 0;   // synchronous warm-up
  int64_t at(int64_t step) const { return step <= sync_steps ? 0 : delay; }
};

}  // namespace asteria
