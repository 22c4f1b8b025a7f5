// The shard layout: whole units, every preconditioner block on exactly one rank, balanced
// ranges, padding, and empty ranks when a layer has fewer units than ranks.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <set>
#include <tuple>

#include "fsdp/shard_layout.hpp"
#include "fsdp/sharding.hpp"
#include "model/model.hpp"
#include "model/model_config.hpp"
#include "optim/blocks.hpp"

using namespace asteria;

TEST(ShardLayout, EveryBlockLivesOnOneRankAndRangesCoverTheLayer) {
  const ModelConfig cfg = model_preset("bench-small");
  for (const ParamTable& t : model_param_tables(cfg))
    for (int W : {1, 2, 3, 4, 8, 64}) {
      const LayerShards s = shard_layer(t, 256, W);
      ASSERT_EQ(s.world(), W);
      EXPECT_EQ(s.begin.front(), 0u);
      EXPECT_EQ(s.begin.back(), t.numel);
      for (int r = 0; r < W; ++r) EXPECT_LE(s.begin[r], s.begin[r + 1]);
      for (const MatrixBlock& b : layer_blocks(0, t, 256, true)) {
        const size_t first = b.offset, last = b.offset + static_cast<size_t>((b.rows - 1) * b.ld + b.cols - 1);
        int owners = 0;
        for (int r = 0; r < W; ++r) owners += first >= s.begin[r] && last < s.begin[r + 1];
        EXPECT_EQ(owners, 1) << b.name << " at W = " << W;
      }
    }
}

TEST(ShardLayout, BalancedPaddedAndEmptyRanks) {
  ParamTable t;
  t.add("w", {8, 4}, ParamClass::Matrix);   // row-blocks of 2 rows: 4 units of 8
  const LayerShards two = shard_layer(t, 2, 2);
  EXPECT_EQ(two.begin, (std::vector<size_t>{0, 16, 32}));
  EXPECT_EQ(two.padded, 16u);
  const LayerShards three = shard_layer(t, 2, 3);   // 32 / 3: cuts at the units nearest 10.7, 21.3
  EXPECT_EQ(three.begin, (std::vector<size_t>{0, 8, 24, 32}));
  EXPECT_EQ(three.padded, 16u);
  const LayerShards six = shard_layer(t, 2, 6);     // more ranks than units: some hold nothing
  int empty = 0;
  for (int r = 0; r < 6; ++r) empty += six.count(r) == 0;
  EXPECT_EQ(empty, 2);
  EXPECT_EQ(six.padded, 8u);
  std::vector<float> flat(32), send(six.padded);
  for (size_t i = 0; i < flat.size(); ++i) flat[i] = static_cast<float>(i);
  for (int r = 0; r < 6; ++r) {
    pack_shard(six, r, flat.data(), send.data());
    for (size_t k = 0; k < six.padded; ++k)
      EXPECT_EQ(send[k], k < six.count(r) ? flat[six.offset(r) + k] : 0.0f) << r << " " << k;
  }
}

TEST(ShardTable, TheShardsBlocksAreTheWholeLayersBlocks) {
  // The optimizer of a rank is built on its shard tables: together, the ranks' blocks must be
  // exactly the whole layer's (same tensor, rows, columns), each on one rank, and every entry
  // lies inside its shard with its row-block's place in the tensor.
  const ModelConfig cfg = model_preset("bench-small");
  for (const ParamTable& t : model_param_tables(cfg))
    for (int W : {2, 3, 4, 8}) {
      // Shifted ranges too (shard_model's): a rank's table is its range's, wherever that lies.
      for (int shift : {0, W - 1}) {
      LayerShards s = shard_layer(t, 256, W);
      s.shift = shift;
      using Key = std::tuple<std::string, int64_t, int64_t, int64_t, int64_t>;
      std::multiset<Key> whole, sharded;
      for (const MatrixBlock& b : layer_blocks(0, t, 256, true))
        whole.insert({t.entries[b.entry].name, b.row0, b.rows, b.col0, b.cols});
      size_t floats = 0;
      for (int r = 0; r < W; ++r) {
        const ParamTable own = shard_table(t, s, r, 256);
        EXPECT_EQ(own.numel, s.count(r));
        for (const ParamEntry& e : own.entries) {
          EXPECT_LE(e.offset + e.numel, own.numel) << e.name;
          const ParamEntry* w = t.find(e.name);
          ASSERT_NE(w, nullptr);
          // The entry's floats are the whole tensor's rows from row_offset on.
          const size_t row = e.shape.size() == 2 ? static_cast<size_t>(e.shape[1]) : 0;
          EXPECT_EQ(s.offset(r) + e.offset, w->offset + static_cast<size_t>(e.row_offset) * row) << e.name;
          if (e.tensor_rows) EXPECT_EQ(e.tensor_rows, w->shape[0]) << e.name;
          floats += e.numel;
        }
        for (const MatrixBlock& b : layer_blocks(0, own, 256, true))
          sharded.insert({own.entries[b.entry].name, b.row0, b.rows, b.col0, b.cols});
      }
      EXPECT_EQ(floats, t.numel);
      EXPECT_EQ(sharded, whole) << "W = " << W;
      }
    }
}

TEST(ShardModel, ShiftsSpreadEachLayersLargestUnitOverTheRanks) {
  // OLMo-1B at 8 ranks: a block's mlp_down is one unit of 2x an even eighth, always the last
  // range. Unshifted, one rank holds it in all 16 blocks; shard_model's shifts bring the most
  // floats any rank holds near an even 1/8 of the model. Same ranges, other owners.
  const std::vector<ParamTable> tables = model_param_tables(model_preset("olmo-1b"));
  for (int W : {2, 8, 64}) {
    SCOPED_TRACE("W = " + std::to_string(W));
    const std::vector<LayerShards> model = shard_model(tables, 2048, W);
    ASSERT_EQ(model.size(), tables.size());
    std::vector<size_t> plain(W, 0), shifted(W, 0);
    size_t total = 0;
    for (size_t l = 0; l < tables.size(); ++l) {
      const LayerShards one = shard_layer(tables[l], 2048, W);
      EXPECT_EQ(model[l].begin, one.begin);
      EXPECT_GE(model[l].shift, 0);
      EXPECT_LT(model[l].shift, W);
      // Every range has exactly one owner.
      std::set<int> ranges;
      for (int r = 0; r < W; ++r) ranges.insert(model[l].range(r));
      EXPECT_EQ(static_cast<int>(ranges.size()), W);
      for (int r = 0; r < W; ++r) {
        plain[r] += one.count(r);
        shifted[r] += model[l].count(r);
      }
      total += tables[l].numel;
    }
    const double even = static_cast<double>(total) / W;
    const double most_plain = static_cast<double>(*std::max_element(plain.begin(), plain.end()));
    const double most = static_cast<double>(*std::max_element(shifted.begin(), shifted.end()));
    EXPECT_LE(most, most_plain);
    if (W == 8) {
      EXPECT_GT(most_plain, 1.5 * even);
      EXPECT_LT(most, 1.1 * even);
    }
    std::printf("W = %d: most floats on a rank %.3f x an even share (unshifted %.3f)\n", W, most / even, most_plain / even);
  }
}
