// The update compensation's bands (optim/update_compensation.hpp): they tile the layer's flat
// buffer, follow the rows of its blocks, name the blocks that use them, give every element its
// own float, and are written to checkpoints as the tensor (whole) or its row-blocks.
#include <gtest/gtest.h>

#include <set>
#include <vector>

#include "optim/blocks.hpp"
#include "optim/update_compensation.hpp"

namespace asteria {
namespace {

// Rows cut in three (10 -> 4, 3, 3 at max dim 4), columns in one; rows in one, columns in three;
// a vector.
ParamTable table() {
  ParamTable t;
  t.add("tall", {10, 4}, ParamClass::Matrix);
  t.add("wide", {4, 10}, ParamClass::Matrix);
  t.add("norm", {5}, ParamClass::Norm);
  return t;
}

TEST(UpdateCompensation, BandsFollowTheBlocksRowsAndTileTheLayer) {
  const ParamTable t = table();
  const std::vector<MatrixBlock> blocks = layer_blocks(0, t, 4, true);
  ASSERT_EQ(blocks.size(), 6u);   // tall: 3 x 1, wide: 1 x 3
  const std::vector<CompensationBand> bands = compensation_bands(t, blocks);
  ASSERT_EQ(bands.size(), 5u);
  const std::vector<size_t> offset = {0, 16, 28, 40, 80}, count = {16, 12, 12, 40, 5};
  const std::vector<BlockRange> served = {{0, 1}, {1, 2}, {2, 3}, {3, 6}, {}};
  for (size_t k = 0; k < bands.size(); ++k) {
    EXPECT_EQ(bands[k].offset, offset[k]) << k;
    EXPECT_EQ(bands[k].count, count[k]) << k;
    EXPECT_EQ(bands[k].blocks, served[k]) << k;
  }
  // Each block lies inside the band that names it.
  for (size_t k = 0; k < bands.size(); ++k)
    for (int b = bands[k].blocks.first; b < bands[k].blocks.end; ++b) {
      EXPECT_GE(blocks[b].offset, bands[k].offset);
      EXPECT_LE(blocks[b].offset + (blocks[b].rows - 1) * blocks[b].ld + blocks[b].cols, bands[k].offset + bands[k].count);
    }
  // Without blocks (AdamW): the whole layer, one state, as before bands.
  const std::vector<CompensationBand> whole = compensation_bands(t, {});
  ASSERT_EQ(whole.size(), 1u);
  EXPECT_EQ(whole[0].count, t.numel);
  EXPECT_TRUE(whole[0].blocks.whole());
  const std::vector<StateSpec> specs = compensation_state_specs(3, t, blocks);
  ASSERT_EQ(specs.size(), 5u);
  EXPECT_EQ(specs[1].name, "layer 3 / update compensation of tall rows 4-6");
  EXPECT_EQ(specs[3].name, "layer 3 / update compensation of wide");
  EXPECT_TRUE(specs[1].shape.empty());   // the tiers treat it as a layer's state, of blocks 1-2
  EXPECT_EQ(specs[1].blocks, (BlockRange{1, 2}));
}

TEST(UpdateCompensation, EveryElementHasItsOwnFloatInItsBand) {
  const std::vector<ParamTable> layers = {table()};
  std::vector<std::vector<MatrixBlock>> blocks = {layer_blocks(0, layers[0], 4, true)};
  UpdateCompensation comp(true, layers, true, blocks);
  ASSERT_EQ(comp.layer_states(0).size(), 5u);
  EXPECT_EQ(comp.state_bytes(), layers[0].numel * sizeof(float));
  std::set<float*> seen;
  for (size_t i = 0; i < layers[0].numel; ++i) {
    float* c = comp.at(0, i);
    EXPECT_TRUE(seen.insert(c).second) << i;
    *c = static_cast<float>(i);
  }
  // A block's rows keep the tensor's stride in its band: (row r, col j) at at(offset) + r * ld + j.
  for (const MatrixBlock& b : blocks[0])
    for (int64_t r = 0; r < b.rows; ++r)
      for (int64_t j = 0; j < b.cols; ++j)
        EXPECT_EQ(comp.at(0, b.offset)[r * b.ld + j], static_cast<float>(b.offset + r * b.ld + j)) << b.name;
  UpdateCompensation off(false, layers, true, blocks);
  EXPECT_EQ(off.at(0, 3), nullptr);
  EXPECT_TRUE(off.layer_states(0).empty());
}

TEST(UpdateCompensation, ABandOfSomeRowsIsCheckpointedAsARowBlockOfItsTensor) {
  const std::vector<ParamTable> layers = {table()};
  UpdateCompensation comp(true, layers, true, {layer_blocks(0, layers[0], 4, true)});
  const std::vector<std::vector<StatePiece>> pieces = comp.state_pieces(0);
  ASSERT_EQ(pieces.size(), 5u);   // one list per band state
  const StatePiece& rows = pieces[1].at(0);   // tall, rows 4-6
  EXPECT_EQ(rows.name, "optim/compensation/tall");
  EXPECT_EQ(rows.shape, (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(rows.offset, 0u);
  EXPECT_EQ(rows.row0, 4);
  EXPECT_EQ(rows.tensor_rows, 10);
  const StatePiece& whole = pieces[3].at(0);   // wide: its one band is the whole tensor
  EXPECT_EQ(whole.shape, (std::vector<int64_t>{4, 10}));
  EXPECT_EQ(whole.tensor_rows, 0);
  // AdamW's single state: a piece per tensor at its offset, as before bands.
  UpdateCompensation single(true, layers, true);
  const std::vector<std::vector<StatePiece>> one = single.state_pieces(0);
  ASSERT_EQ(one.size(), 1u);
  ASSERT_EQ(one[0].size(), 3u);
  EXPECT_EQ(one[0][1].offset, 40u);
  EXPECT_EQ(one[0][1].tensor_rows, 0);
}

}  // namespace
}  // namespace asteria
