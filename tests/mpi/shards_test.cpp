// Sharded layers over MPI against a serial reference: gathering every rank's shard rebuilds the
// whole buffer, and the reduce-scatter of everyone's gradient leaves each rank the sum over
// ranks of its own range; with uneven, padded shards and ranks that hold no unit.
#include <gtest/gtest.h>

#include <vector>

#include "comm/mpi_communicator.hpp"
#include "fsdp/shard_layout.hpp"
#include "fsdp/sharding.hpp"
#include "comm/topology.hpp"

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

TEST(MpiShards, ShardingGathersReducesAndSumsInEveryMode) {
  // Each mode against the serial reference: after the reduce-scatters (sharded) and the replicas'
  // all-reduce every rank's part holds the mean over all ranks of their gradients; gather
  // rebuilds the whole layer from the owners' shards;
  // sum_over_group adds the shard group's parts.
  const int W = make_mpi_world_communicator()->size();
  for (const FsdpMode mode : {FsdpMode::Full, FsdpMode::Hybrid, FsdpMode::None}) {
    if (mode == FsdpMode::Hybrid && W % 2 != 0) continue;
    SCOPED_TRACE(to_string(mode));
    Topology topo = make_topology(make_mpi_world_communicator(), mode == FsdpMode::Hybrid ? 2 : 1);
    topo.set_timeout(60);
    const int r = topo.rank;
    const ParamTable t = uneven_table();
    Sharding sh(mode, topo, {t}, 3);
    const int G = sh.group_size();
    EXPECT_EQ(G, mode == FsdpMode::Full ? W : mode == FsdpMode::Hybrid ? 2 : 1);
    // Owned table: the shard's units, which tile [offset, offset + count).
    const ParamTable& own = sh.owned_tables()[0];
    EXPECT_EQ(own.numel, sh.count(0));
    std::vector<float> grad(t.numel);
    for (size_t i = 0; i < t.numel; ++i) grad[i] = grad_of(r, i);
    // Sharded: two micro-batches' reduce-scatters add up in the shard; then the replicas' mean.
    float* reduced = grad.data();
    if (sh.sharded()) {
      std::vector<float> half(t.numel);
      for (size_t i = 0; i < t.numel; ++i) half[i] = 0.5f * grad[i];
      sh.reduce_scatter(0, half.data(), "reduce_scatter micro 0");
      sh.reduce_scatter(0, half.data(), "reduce_scatter micro 1");
      reduced = sh.shard_grads(0);
    }
    sh.reduce_over_replicas(0, reduced, "all_reduce layer");
    for (size_t k = 0; k < sh.count(0); ++k) {
      float sum = 0;
      for (int q = 0; q < W; ++q) sum += grad_of(q, sh.offset(0) + k);
      EXPECT_NEAR(reduced[k], sum / W, 1e-3f) << "rank " << r << " element " << k;
    }
    // Sharded: the owner's shard into every rank's whole buffer.
    if (sh.sharded()) {
      for (size_t k = 0; k < sh.count(0); ++k) sh.shard_params(0)[k] = 0.5f * static_cast<float>(sh.offset(0) + k);
      std::vector<float> params(t.numel, -1.0f);
      sh.gather(0, params.data(), "gather layer");
      for (size_t i = 0; i < t.numel; ++i) EXPECT_EQ(params[i], 0.5f * static_cast<float>(i)) << i;
    }
    double part = static_cast<double>(sh.count(0));
    sh.sum_over_group(&part, 1, "sum");
    EXPECT_EQ(part, G > 1 ? static_cast<double>(t.numel) : static_cast<double>(sh.count(0)));
  }
}
