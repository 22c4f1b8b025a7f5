// The coherence protocol's transfers under real mpirun: every replica receives the owner's
// version (bit for bit what the owner installs, fp32), only when the rule ships it, and the
// bytes each scheme moves inside and between nodes equal the hand-counted hops (ranks 2k and
// 2k + 1 on node k).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "comm/mpi_communicator.hpp"
#include "runtime/coherence.hpp"

using namespace asteria;

namespace {

MatrixBlock block(int layer, int64_t rows, int64_t cols, const char* name) {
  MatrixBlock b;
  b.layer = layer;
  b.rows = rows;
  b.cols = cols;
  b.name = name;
  return b;
}

// A SOAP-like version: bases and permutations, values that do not round to themselves in fp32.
RefreshJob version_of(int64_t rows, int64_t cols, int seed) {
  RefreshJob j;
  j.rows = rows;
  j.cols = cols;
  for (int64_t i = 0; i < rows * rows; ++i) j.left_basis.push_back(std::sin(seed + 0.1 * i) / 3.0);
  for (int64_t i = 0; i < cols * cols; ++i) j.right_basis.push_back(std::cos(seed + 0.2 * i) / 7.0);
  for (int64_t i = 0; i < rows; ++i) j.left_perm.push_back(static_cast<int>((i + seed) % rows));
  for (int64_t i = 0; i < cols; ++i) j.right_perm.push_back(static_cast<int>((cols - 1 - i + seed) % cols));
  return j;
}

}  // namespace

TEST(MpiCoherence, EveryReplicaGetsTheOwnersVersionAndTheBytesAreTheHops) {
  auto world = make_mpi_world_communicator();
  world->set_timeout(60);
  const int W = world->size(), me = world->rank();
  if (W < 2) GTEST_SKIP() << "needs 2 or more ranks";
  const int node = me / 2, nodes = (W + 1) / 2;
  const std::vector<std::vector<MatrixBlock>> blocks = {{block(0, 3, 2, "a"), block(0, 4, 4, "b")}, {block(1, 2, 5, "c")}};
  for (bool hierarchical : {false, true})
    for (int staleness : {1, 2}) {
      SCOPED_TRACE(std::string(hierarchical ? "hierarchical" : "flat") + ", S = " + std::to_string(staleness));
      Coherence coh(CoherenceRule{staleness, 0}, hierarchical, *world, node, blocks);
      size_t want_intra = 0, want_inter = 0;
      for (int round = 1; round <= 3; ++round)
        for (int l = 0; l < 2; ++l)
          for (int b = 0; b < static_cast<int>(blocks[l].size()); ++b) {
            const MatrixBlock& mb = blocks[l][b];
            const RefreshJob truth = version_of(mb.rows, mb.cols, 10 * l + b + round);
            RefreshJob job = coh.owns(l, b) ? truth : RefreshJob{};
            const bool ship = coh.sync(l, b, 5 * round, job);
            // S = 2: the first version (always), then the third (2 behind).
            const bool want = round == 1 || (round - 1) % staleness == 0;
            EXPECT_EQ(ship, want);
            if (ship) {
              ASSERT_EQ(job.left_basis.size(), truth.left_basis.size());
              for (size_t i = 0; i < truth.left_basis.size(); ++i)
                EXPECT_EQ(static_cast<float>(job.left_basis[i]), static_cast<float>(truth.left_basis[i]));
              for (size_t i = 0; i < truth.right_basis.size(); ++i)
                EXPECT_EQ(static_cast<float>(job.right_basis[i]), static_cast<float>(truth.right_basis[i]));
              EXPECT_EQ(job.left_perm, truth.left_perm);
              EXPECT_EQ(job.right_perm, truth.right_perm);
            }
            EXPECT_EQ(coh.registry().block(coh.index(l, b)).newest, round);
            EXPECT_EQ(coh.registry().block(coh.index(l, b)).adopted, ship ? round : round - (round - 1) % staleness);
            // Hand-counted: a control message per hop, the payload too when shipped.
            const size_t bytes = Coherence::kControlBytes +
                                 (ship ? Coherence::payload_bytes(OptimizerKind::Soap, mb.rows, mb.cols) : 0);
            const int owner = coh.owner(l, b), owner_node = owner / 2;
            const int same_node = std::min(W, 2 * owner_node + 2) - 2 * owner_node - 1;   // the owner's node mates
            const int inter = hierarchical ? nodes - 1 : W - 1 - same_node;
            want_inter += inter * bytes;
            want_intra += (W - 1 - inter) * bytes;
          }
      // Every rank's sent bytes, summed.
      const CoherenceTraffic t = coh.take_traffic();
      std::vector<double> sums = {static_cast<double>(t.bytes_intra), static_cast<double>(t.bytes_inter)};
      Request r = world->all_reduce(sums.data(), sums.size(), "sum of the coherence bytes");
      world->wait(r);
      EXPECT_EQ(sums[0], static_cast<double>(want_intra));
      EXPECT_EQ(sums[1], static_cast<double>(want_inter));
    }
}
