#include "fsdp/shard_layout.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "core/error.hpp"
#include "optim/blocks.hpp"

namespace asteria {

LayerShards shard_layer(const ParamTable& table, int64_t max_dim, int world) {
  ASTERIA_ASSERT(world >= 1 && max_dim >= 1);
  // Unit boundaries: the end of every row-block and every 1-D tensor, in buffer order.
  std::vector<size_t> ends;
  for (const ParamEntry& e : table.entries) {
    if (e.shape.size() == 2) {
      for (auto [r0, rn] : split_dimension(e.shape[0], max_dim))
        ends.push_back(e.offset + static_cast<size_t>((r0 + rn) * e.shape[1]));
    } else {
      ends.push_back(e.offset + e.numel);
    }
  }
  LayerShards s;
  s.numel = table.numel;
  s.begin.assign(static_cast<size_t>(world) + 1, table.numel);
  s.begin[0] = 0;
  // Rank r ends at the unit boundary nearest to (r + 1) / world of the buffer (never before
  // the previous rank's end).
  size_t u = 0;
  for (int r = 1; r < world; ++r) {
    const double target = static_cast<double>(table.numel) * r / world;
    size_t end = s.begin[r - 1];
    while (u < ends.size() && static_cast<double>(ends[u]) <= target) end = ends[u++];
    if (u < ends.size() && static_cast<double>(ends[u]) - target < target - static_cast<double>(end)) end = ends[u++];
    s.begin[r] = std::max(end, s.begin[r - 1]);
  }
  for (int r = 0; r < world; ++r) s.padded = std::max(s.padded, s.count(r));
  s.padded = std::max<size_t>(s.padded, 1);
  return s;
}

std::vector<LayerShards> shard_model(const std::vector<ParamTable>& tables, int64_t max_dim, int world) {
  std::vector<LayerShards> out;
  std::vector<size_t> held(static_cast<size_t>(world), 0);   // floats per rank over the layers so far
  for (const ParamTable& t : tables) {
    LayerShards s = shard_layer(t, max_dim, world);
    size_t least = SIZE_MAX;
    int best = 0;
    for (int shift = 0; shift < world; ++shift) {
      s.shift = shift;
      size_t most = 0;
      for (int r = 0; r < world; ++r) most = std::max(most, held[r] + s.count(r));
      if (most < least) {
        least = most;
        best = shift;
      }
    }
    s.shift = best;
    for (int r = 0; r < world; ++r) held[r] += s.count(r);
    out.push_back(std::move(s));
  }
  return out;
}

void pack_shard(const LayerShards& s, int rank, const float* flat, float* send) {
  const size_t n = s.count(rank);
  if (n) std::memcpy(send, flat + s.offset(rank), n * sizeof(float));
  std::fill(send + n, send + s.padded, 0.0f);
}

void unpack_gathered(const LayerShards& s, const float* gathered, float* flat) {
  for (int r = 0; r < s.world(); ++r)
    if (s.count(r)) std::memcpy(flat + s.offset(r), gathered + r * s.padded, s.count(r) * sizeof(float));
}

void pack_for_reduce_scatter(const LayerShards& s, const float* flat, float* send) {
  for (int r = 0; r < s.world(); ++r) pack_shard(s, r, flat, send + r * s.padded);
}

}  // namespace asteria
