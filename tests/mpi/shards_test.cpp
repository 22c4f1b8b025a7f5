// Sharded layers over MPI against a serial reference: gathering every rank's shard rebuilds the
// whole buffer, and the reduce-scatter of everyone's gradient leaves each rank the sum over
// ranks of its own range; with uneven, padded shards and ranks that hold no unit.
#include <gtest/gtest.h>

#include <vector>

#include "fsdp/mpi_communicator.hpp"
#include "fsdp/shard_layout.hpp"

using namespace asteria;

namespace {

// Uneven: 7 x 5 in row-blocks of 3, 2, 2 rows; a 1-D tensor; a 2 x 4 matrix; a 1-D tensor.
ParamTable uneven_table() {
  ParamTable t;
  t.add("a", {7, 5}, ParamClass::Matrix);
  t.add("n1", {5}, ParamClass::Norm);
  t.add("b", {2, 4}, ParamClass::Matrix);
  t.add("n2", {3}, ParamClass::Norm);
  return t;
}

float grad_of(int rank, size_t i) { return static_cast<float>((rank + 1) * 100 + static_cast<int>(i)); }

}  // namespace

TEST(MpiShards, GatherRebuildsTheLayerAndReduceScatterSumsEachShard) {
  auto c = make_mpi_world_communicator();
  c->set_timeout(60);
  const int W = c->size(), r = c->rank();
  for (int64_t max_dim : {3, 1000}) {   // 1000: one unit per tensor, so 4 ranks leave some empty
    const ParamTable t = uneven_table();
    const LayerShards s = shard_layer(t, max_dim, W);
    std::vector<float> full(t.numel);
    for (size_t i = 0; i < t.numel; ++i) full[i] = 0.25f * static_cast<float>(i);
    // Each rank holds only its shard; the gather rebuilds the buffer on every rank.
    std::vector<float> send(s.padded), gathered(W * s.padded), rebuilt(t.numel, -1.0f);
    pack_shard(s, r, full.data(), send.data());
    Request req = c->all_gather(send.data(), s.padded, gathered.data(), "all_gather layer");
    c->wait(req);
    unpack_gathered(s, gathered.data(), rebuilt.data());
    EXPECT_EQ(rebuilt, full) << "max_dim " << max_dim;
    // Gradients differ per rank; each rank keeps the sum of its range.
    std::vector<float> grad(t.numel), packed(W * s.padded), mine(s.padded);
    for (size_t i = 0; i < t.numel; ++i) grad[i] = grad_of(r, i);
    pack_for_reduce_scatter(s, grad.data(), packed.data());
    req = c->reduce_scatter(packed.data(), mine.data(), s.padded, "reduce_scatter layer");
    c->wait(req);
    for (size_t k = 0; k < s.padded; ++k) {
      float expected = 0;
      if (k < s.count(r))
        for (int q = 0; q < W; ++q) expected += grad_of(q, s.offset(r) + k);
      EXPECT_EQ(mine[k], expected) << "rank " << r << " element " << k << " max_dim " << max_dim;
    }
  }
}
