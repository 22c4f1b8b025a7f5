#pragma once
// The preconditioner blocks [first, end) of a layer that one optimizer step updates: a layer whose
// optimizer state moves through the tiers in parts (runtime/tier_layout.hpp) is stepped one part
// at a time (Optimizer::step_part). end -1: to the layer's last block (the whole layer from 0).

namespace asteria {

struct BlockRange {
  int first = 0, end = -1;
  bool whole() const { return first == 0 && end < 0; }
  bool contains(int block) const { return block >= first && (end < 0 || block < end); }
  // The end as a block index, for a layer of `blocks` blocks.
  int end_in(int blocks) const { return end < 0 ? blocks : end; }
  bool operator==(const BlockRange&) const = default;
};

}  // namespace asteria
