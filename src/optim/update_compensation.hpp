#pragma once
// Compensated parameter updates (Kahan summation), so that no update is lost to fp32 rounding.
//
// An fp32 weight w cannot take a change smaller than half its ulp (2^-25 |w| at best): at the
// tail of a cosine schedule lr * wd * w falls below that (lr * wd < 3e-8) and decoupled weight
// decay stops, and updates a few ulps long are rounded by up to tens of percent every step, in
// the same direction while the gradient is steady. With compensation each parameter carries one
// more fp32, c, holding the part of the updates that w could not take (w + c is the parameter to
// about 48 bits); the next update adds it back. w stays the fp32 value nearest that sum, so the
// model reads w unchanged, and every update, however small, reaches it once it adds up to half
// an ulp.
//
// `optim.compensated_updates` (default true) turns it on for every optimizer: one fp32 state per
// parameter, hot, listed first in the layer's states. For AdamW it is one state per layer
// ("layer L / update compensation"). For an optimizer over preconditioner blocks it is cut into
// bands, contiguous runs of the layer's flat buffer: one per run of an entry's rows that its
// blocks share (a row of blocks), and one per entry without blocks; each band names the blocks
// that use it (StateSpec::blocks), so that a layer moved through the tiers in parts brings only
// its part's bands (a 50k x 2048 embedding's compensation is 400 MiB, its 2048-row band 16 MiB).
// The values and the arithmetic are the same either way.
#include <cstddef>
#include <vector>

#include "model/param_table.hpp"
#include "optim/blocks.hpp"
#include "optim/optimizer.hpp"
#include "optim/state_tensor.hpp"

namespace asteria {

// w += delta, carrying the rounding error of the sum in c.
inline void compensated_add(float& w, float& c, float delta) {
  const float y = delta - c;
  const float t = w + y;
  c = (t - w) - y;
  w = t;
}

// A contiguous run of a layer's flat buffer with a compensation state of its own.
struct CompensationBand {
  size_t offset = 0, count = 0;   // floats, in the layer's flat buffer
  BlockRange blocks;              // the blocks whose updates use it (whole(): every part's)
  int entry = -1;                 // its parameter tensor (-1: the whole layer)
  int64_t row0 = 0, rows = 0;     // of the entry's rows (local to a shard's entry)
};

// The bands of a layer (in buffer order, tiling it): one for the whole layer when `blocks` is
// empty; otherwise per entry, a band per distinct row range of its blocks (layer_blocks order:
// row-major, so a band's blocks are consecutive) or the whole entry when it has no block.
std::vector<CompensationBand> compensation_bands(const ParamTable& table, const std::vector<MatrixBlock>& blocks);

// The states of those bands, in the same order.
std::vector<StateSpec> compensation_state_specs(int layer, const ParamTable& table,
                                                const std::vector<MatrixBlock>& blocks);

// The compensation tensors of every layer, or none when disabled.
class UpdateCompensation {
 public:
  // blocks[l]: layer l's preconditioner blocks (none given: one state per layer).
  UpdateCompensation(bool enabled, const std::vector<ParamTable>& layers, bool own_memory,
                     const std::vector<std::vector<MatrixBlock>>& blocks = {});
  bool enabled() const { return !bands_.empty(); }
  // The compensation of element `offset` of layer l's flat buffer (nullptr when disabled), in
  // its band's memory, which must be resident: the rows of a band keep their entry's row stride.
  float* at(int l, size_t offset);
  // The layer's state tensors (its bands; none when disabled) and their checkpoint pieces:
  // "optim/compensation/<tensor>", a band of some of a tensor's rows written as its row-block.
  std::vector<StateTensor*> layer_states(int l);
  std::vector<std::vector<StatePiece>> state_pieces(int l) const;
  size_t state_bytes() const;

 private:
  std::vector<std::vector<CompensationBand>> bands_;   // per layer
  std::vector<std::vector<StateTensor>> states_;       // per layer, per band; never resized after construction
  std::vector<ParamTable> tables_;
  std::vector<OwnedStateMemory> own_memory_;
};

}  // namespace asteria
