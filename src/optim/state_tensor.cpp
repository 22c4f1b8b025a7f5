#include "optim/state_tensor.hpp"

namespace asteria {

const char* to_string(StateClass c) {
  switch (c) {
    case StateClass::Hot: return "hot";
    case StateClass::Warm: return "warm";
    case StateClass::Cold: return "cold";
  }
  return "?";
}

void OwnedStateMemory::bind(const std::vector<StateTensor*>& states) {
  auto padded = [](size_t n) { return (n + 15) / 16 * 16; };  // keeps every tensor 64-byte aligned
  size_t total = 0;
  for (const StateTensor* s : states) total += padded(s->size());
  memory_.resize(total);
  size_t offset = 0;
  for (StateTensor* s : states) {
    s->bind(memory_.data() + offset);
    offset += padded(s->size());
  }
}

}  // namespace asteria
