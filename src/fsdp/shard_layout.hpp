#pragma once
// How a layer's flat parameter buffer is sharded over the ranks of a shard group (DESIGN.md
// "FSDP"). The buffer is cut into units: each row-block of a 2-D tensor (the row ranges of its
// preconditioner blocks, split_dimension(rows, max_preconditioner_dim), all columns) and each
// 1-D tensor whole. Rank r holds one contiguous range of whole units, [begin[r], begin[r+1]),
// the ranges balanced by size in buffer order. So every preconditioner block, and all of its
// state, lives on exactly one rank; block boundaries are those of the unsharded parameter
// whatever the world size; a layer with fewer units than ranks leaves some ranks empty (they
// still join every collective); and sizes need not divide: every rank's part of a collective
// is `padded` floats (the largest shard), zero-padded.
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
  std::vector<size_t> begin;   // [world + 1]: rank r holds [begin[r], begin[r + 1]) of the buffer
  size_t padded = 0;           // floats of each rank's part of a collective (>= 1)
  size_t numel = 0;            // the layer's flat buffer
  int world() const { return static_cast<int>(begin.size()) - 1; }
  size_t offset(int r) const { return begin[r]; }
  size_t count(int r) const { return begin[r + 1] - begin[r]; }
};

LayerShards shard_layer(const ParamTable& table, int64_t max_preconditioner_dim, int world);

// flat: the whole layer buffer. send: `padded` floats, rank r's shard then zeros.
void pack_shard(const LayerShards& s, int rank, const float* flat, float* send);
// gathered: world * padded floats (rank order) -> flat.
void unpack_gathered(const LayerShards& s, const float* gathered, float* flat);
// flat -> send: world * padded floats, part r = rank r's range, zero-padded.
void pack_for_reduce_scatter(const LayerShards& s, const float* flat, float* send);

}  // namespace asteria
