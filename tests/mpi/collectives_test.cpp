// The MPI communicator against serial references, at whatever world size mpirun gives (ctest
// runs 1, 2, 3 and 4 ranks): all-gather, reduce-scatter, all-reduce, broadcast, point to point,
// the topology's sub-communicators, and a receive that never completes ending in an Error that
// names it, within the timeout.
#include <gtest/gtest.h>

#include <cstdint>
#include <numeric>
#include <vector>

#include "core/error.hpp"
#include "core/timer.hpp"
#include "comm/mpi_communicator.hpp"
#include "comm/topology.hpp"

using namespace asteria;

namespace {

std::unique_ptr<Communicator> world() {
  auto c = make_mpi_world_communicator();
  c->set_timeout(60);
  return c;
}

// A value no two (rank, index) pairs share.
float value(int rank, size_t i) { return static_cast<float>(rank * 1000 + static_cast<int>(i)) * 0.5f; }

}  // namespace

TEST(MpiCollectives, AllGatherPutsEachRanksPartAtItsOffset) {
  auto c = world();
  const int W = c->size(), r = c->rank();
  const size_t n = 7;
  std::vector<float> send(n), recv(n * W, -1.0f);
  for (size_t i = 0; i < n; ++i) send[i] = value(r, i);
  Request req = c->all_gather(send.data(), n, recv.data(), "all_gather test");
  c->wait(req);
  for (int q = 0; q < W; ++q)
    for (size_t i = 0; i < n; ++i) EXPECT_EQ(recv[q * n + i], value(q, i)) << "rank " << q << " element " << i;
  // In place: the rank's own part already sits at its offset.
  std::vector<float> inplace(n * W, -1.0f);
  for (size_t i = 0; i < n; ++i) inplace[r * n + i] = value(r, i);
  req = c->all_gather(inplace.data() + r * n, n, inplace.data(), "all_gather in place");
  c->wait(req);
  EXPECT_EQ(inplace, recv);
}

TEST(MpiCollectives, ReduceScatterSumsEachRanksPart) {
  auto c = world();
  const int W = c->size(), r = c->rank();
  const size_t n = 5;
  std::vector<float> send(n * W), recv(n, 0.0f);
  for (size_t j = 0; j < n * W; ++j) send[j] = value(r, j);
  Request req = c->reduce_scatter(send.data(), recv.data(), n, "reduce_scatter test");
  c->wait(req);
  for (size_t i = 0; i < n; ++i) {
    float expected = 0;   // the same order of the sum on every rank is not promised: small ints are exact
    for (int q = 0; q < W; ++q) expected += value(q, r * n + i);
    EXPECT_EQ(recv[i], expected) << "element " << i;
  }
}

// A float no small-integer arithmetic reaches exactly, so that the order of a sum shows in its bits.
// (A hash, not libm: a vectorized sinf may differ from the scalar one in the last bit.)
float awkward(int rank, size_t i) {
  uint64_t h = (static_cast<uint64_t>(rank) << 40) ^ i;
  h *= 0x9E3779B97F4A7C15ull;
  h ^= h >> 29;
  return static_cast<float>(h % 2'000'003) / 1.37e6f - 0.73f;
}

TEST(MpiCollectives, ReduceScattervSumsAlongTheRingInItsDocumentedOrder) {
  auto c = world();
  const int W = c->size(), r = c->rank();
  // Uneven parts, an empty one, and one above an 8 MiB buffer; twice, in flight together.
  std::vector<int> counts(W);
  for (int q = 0; q < W; ++q) counts[q] = q == 1 ? 0 : (q == 0 ? 2'500'000 : 1000 + 37 * q);
  const size_t total = std::accumulate(counts.begin(), counts.end(), size_t{0});
  std::vector<float> send(total);
  for (size_t j = 0; j < total; ++j) send[j] = awkward(r, j);
  std::vector<float> recv(counts[r], -1.0f), again(counts[r], -2.0f);
  Request a = c->reduce_scatterv(send.data(), recv.data(), counts, "reduce_scatterv test");
  Request b = c->reduce_scatterv(send.data(), again.data(), counts, "reduce_scatterv again");
  c->wait(a);
  c->wait(b);
  const size_t offset = std::accumulate(counts.begin(), counts.begin() + r, size_t{0});
  for (int i = 0; i < counts[r]; ++i) {
    // Rank r+1's part first, then each next rank's, this rank's last.
    float expected = awkward((r + 1) % W, offset + i);
    for (int k = 2; k <= W; ++k) expected += awkward((r + k) % W, offset + i);
    if (W == 1) expected = awkward(r, offset + i);
    ASSERT_EQ(recv[i], expected) << "element " << i;
  }
  EXPECT_EQ(again, recv);
}

TEST(MpiCollectives, AllReduceGivesEveryRankTheSameBits) {
  auto c = world();
  const int W = c->size(), r = c->rank();
  const size_t n = 300'001;
  std::vector<float> x(n);
  for (size_t i = 0; i < n; ++i) x[i] = awkward(r, i);
  Request req = c->all_reduce(x.data(), n, "all_reduce of awkward floats");
  c->wait(req);
  std::vector<float> rank0 = x;
  req = c->broadcast(rank0.data(), n * sizeof(float), 0, "broadcast of rank 0's sum");
  c->wait(req);
  EXPECT_EQ(x, rank0) << "rank " << r << " of " << W;
  for (size_t i = 0; i < n; i += 9973) {
    double sum = 0;
    for (int q = 0; q < W; ++q) sum += awkward(q, i);
    EXPECT_NEAR(x[i], sum, 1e-5) << "element " << i;
  }
}

TEST(MpiCollectives, AllReduceBroadcastAndRing) {
  auto c = world();
  const int W = c->size(), r = c->rank();
  std::vector<double> x = {1.0 * r, 2.0, -0.25 * r};
  Request req = c->all_reduce(x.data(), x.size(), "all_reduce test");
  c->wait(req);
  const double ranks = W * (W - 1) / 2.0;
  EXPECT_EQ(x, (std::vector<double>{ranks, 2.0 * W, -0.25 * ranks}));
  int token = r == W - 1 ? 4242 : 0;
  req = c->broadcast(&token, sizeof token, W - 1, "broadcast test");
  c->wait(req);
  EXPECT_EQ(token, 4242);
  if (W == 1) return;
  int out = r, in = -1;
  Request s = c->send(&out, sizeof out, (r + 1) % W, 3, "ring send");
  Request q = c->recv(&in, sizeof in, (r + W - 1) % W, 3, "ring recv");
  c->wait(q);
  c->wait(s);
  EXPECT_EQ(in, (r + W - 1) % W);
}

TEST(MpiCollectives, TopologySplitsNodesAndLeaders) {
  const int W = world()->size();
  const int per_node = W % 2 == 0 ? 2 : 1;   // distributed.ranks_per_node standing in for nodes
  Topology t = make_topology(world(), per_node);
  EXPECT_EQ(t.nodes, W / per_node);
  EXPECT_EQ(t.node, t.rank / per_node);
  EXPECT_EQ(t.intra->size(), per_node);
  EXPECT_EQ(t.intra->rank(), t.local_rank);
  EXPECT_EQ(t.inter->size(), t.nodes);
  EXPECT_EQ(t.inter->rank(), t.node);
  double v = t.rank;
  Request req = t.intra->all_reduce(&v, 1, "intra all_reduce");
  t.intra->wait(req);
  double first = t.node * per_node;
  EXPECT_EQ(v, per_node * first + per_node * (per_node - 1) / 2.0);   // the ranks of this node
  if (W % 2 == 1 && W > 1) {   // 3 ranks are not whole nodes of 2
    EXPECT_THROW(make_topology(world(), 2), Error);
  }
}

TEST(MpiCollectives, AStalledReceiveEndsWithAnErrorNamingItWithinTheTimeout) {
  auto c = world();
  if (c->size() < 2) GTEST_SKIP() << "needs two ranks";
  int msg = 0;
  if (c->rank() == 0) {
    Request req = c->recv(&msg, sizeof msg, 1, 9, "recv blocks.3 from rank 1");
    c->set_timeout(0.3);
    Timer t;
    try {
      c->wait(req);
      ADD_FAILURE() << "the receive completed";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("recv blocks.3 from rank 1 did not complete within"), std::string::npos)
          << e.what();
    }
    EXPECT_LT(t.seconds(), 5.0);
    c->set_timeout(60);
    c->barrier("after the stall");
    c->wait(req);   // rank 1 sends now: the request completes, nothing is left in flight
    EXPECT_EQ(msg, 77);
  } else {
    c->barrier("after the stall");
    if (c->rank() == 1) {
      msg = 77;
      Request s = c->send(&msg, sizeof msg, 0, 9, "late send");
      c->wait(s);
    }
  }
}
