#pragma once
// How a layer's flat parameter buffer is sharded over the ranks of a shard group (docs/DESIGN.md
// "FSDP"). The buffer is cut into units: each row-block of a 2-D tensor (the row ranges of its
// preconditioner blocks, split_dimension(rows, max_preconditioner_dim), all columns) and each
// 1-D tensor whole. The buffer is cut into `world` contiguous ranges of whole units,
// [begin[k], begin[k+1]), balanced by size in buffer order, and rank r holds range
// (r - shift) mod world. So every preconditioner block, and all of its state, lives on exactly
// one rank; block boundaries are those of the unsharded parameter whatever the world size; a
// layer with fewer units than ranks leaves some ranks empty (they still join every
// collective); and sizes need not divide: every rank's part of a padded collective is `padded`
// floats (the largest shard), zero-padded.
//
// The shift balances the model, not only the layer: a layer's largest unit (OLMo-1B's
// mlp_down, 2x an even eighth of a block at 8 ranks) would otherwise fall to the same rank in
// every layer. shard_model() picks each layer's shift so that the most floats any rank holds
// over the layers so far is least (ties: the smaller shift), a pure function of the tables
// and the world size.
//
// Collective layouts: the all-gather of a layer exchanges each rank's padded shard and unpacks
// the W parts into the flat buffer; the reduce-scatter packs the full gradient as W padded
// parts, part r = rank r's range, and leaves each rank the sum over ranks of its own range.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "model/param_table.hpp"

namespace asteria {

struct LayerShards {
  std::vector<size_t> begin;   // [world + 1]: range k is [begin[k], begin[k + 1]) of the buffer
  int shift = 0;               // rank r holds range (r - shift) mod world
  size_t padded = 0;           // floats of each rank's part of a padded collective (>= 1)
  size_t numel = 0;            // the layer's flat buffer
  int world() const { return static_cast<int>(begin.size()) - 1; }
  int range(int r) const { return (r - shift % world() + world()) % world(); }
  size_t offset(int r) const { return begin[range(r)]; }
  size_t count(int r) const { return begin[range(r) + 1] - begin[range(r)]; }
};

// One layer's ranges (shift 0).
LayerShards shard_layer(const ParamTable& table, int64_t max_preconditioner_dim, int world);
// Every layer's, each shifted to balance the floats per rank over the model (see above).
std::vector<LayerShards> shard_model(const std::vector<ParamTable>& tables, int64_t max_preconditioner_dim, int world);

// flat: the whole layer buffer. send: `padded` floats, rank r's shard then zeros.
void pack_shard(const LayerShards& s, int rank, const float* flat, float* send);
// gathered: world * padded floats (rank order) -> flat.
void unpack_gathered(const LayerShards& s, const float* gathered, float* flat);
// flat -> send: world * padded floats, part r = rank r's range, zero-padded.
void pack_for_reduce_scatter(const LayerShards& s, const float* flat, float* send);

}  // namespace asteria
