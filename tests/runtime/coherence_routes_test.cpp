// Owners balanced by refresh cost, and the hops of a version: flat (the owner to every replica)
// and hierarchical (owner -> its node leader -> the other leaders -> their nodes), against
// hand-counted hops.
#include "runtime/coherence_routes.hpp"

#include <gtest/gtest.h>

#include <map>
#include <set>

using asteria::assign_owners;
using asteria::version_hops;
using asteria::VersionHop;

TEST(CoherenceOwners, BalancedByCostLargestFirst) {
  // Costs 8, 1, 1, 1, 1, 4, 4 over 2 replicas, largest first to the least loaded (loads after):
  // 8 -> r0 (8, 0); 4 -> r1 (8, 4); 4 -> r1 (8, 8); 1 -> r0 (9, 8); 1 -> r1 (9, 9); 1 -> r0; 1 -> r1.
  const std::vector<int> owner = assign_owners({8, 1, 1, 1, 1, 4, 4}, 2);
  EXPECT_EQ(owner, (std::vector<int>{0, 0, 1, 0, 1, 1, 1}));
  std::vector<double> load(2, 0);
  const std::vector<double> costs = {8, 1, 1, 1, 1, 4, 4};
  for (size_t b = 0; b < costs.size(); ++b) load[owner[b]] += costs[b];
  EXPECT_EQ(load[0], 10);
  EXPECT_EQ(load[1], 10);
  // One replica owns everything; more replicas than blocks leave some with none.
  EXPECT_EQ(assign_owners({3, 2, 1}, 1), (std::vector<int>{0, 0, 0}));
  EXPECT_EQ(assign_owners({3, 2}, 4), (std::vector<int>{0, 1}));
}

namespace {
// Every replica but the owner receives once, and only from a rank that already has the version.
void expect_tree(int owner, const std::vector<int>& node_of, const std::vector<VersionHop>& hops) {
  std::set<int> have = {owner};
  std::map<int, int> received;
  for (const VersionHop& h : hops) {
    EXPECT_TRUE(have.count(h.from)) << h.from << " -> " << h.to << " before " << h.from << " has it";
    EXPECT_EQ(h.inter, node_of[h.from] != node_of[h.to]);
    ++received[h.to];
    have.insert(h.to);
  }
  EXPECT_EQ(have.size(), node_of.size());
  for (const auto& [r, n] : received) EXPECT_EQ(n, 1) << "replica " << r;
  EXPECT_EQ(received.count(owner), 0u);
}
int inter_hops(const std::vector<VersionHop>& hops) {
  int n = 0;
  for (const VersionHop& h : hops) n += h.inter;
  return n;
}
}  // namespace

TEST(CoherenceRoutes, FlatAndHierarchicalOverNodes) {
  // fsdp none, 2 nodes x 2 ranks: replicas 0, 1 on node 0, 2, 3 on node 1.
  const std::vector<int> none = {0, 0, 1, 1};
  for (int owner = 0; owner < 4; ++owner) {
    SCOPED_TRACE("owner " + std::to_string(owner));
    const auto flat = version_hops(owner, none, false);
    const auto tree = version_hops(owner, none, true);
    expect_tree(owner, none, flat);
    expect_tree(owner, none, tree);
    EXPECT_EQ(flat.size(), 3u);
    EXPECT_EQ(inter_hops(flat), 2);   // to both ranks of the other node
    EXPECT_EQ(inter_hops(tree), 1);   // once per other node: 1 / ranks_per_node of flat's
  }
  // Owner 3 (node 1, not its leader), hierarchical: 3 -> 2 (its leader), 2 -> 0 (node 0's), 0 -> 1.
  const auto t = version_hops(3, none, true);
  ASSERT_EQ(t.size(), 3u);
  EXPECT_EQ(t[0].from, 3);
  EXPECT_EQ(t[0].to, 2);
  EXPECT_FALSE(t[0].inter);
  EXPECT_EQ(t[1].from, 2);
  EXPECT_EQ(t[1].to, 0);
  EXPECT_TRUE(t[1].inter);
  EXPECT_EQ(t[2].from, 0);
  EXPECT_EQ(t[2].to, 1);
  EXPECT_FALSE(t[2].inter);

  // fsdp hybrid: one replica per node; both schemes send to each other node once.
  const std::vector<int> hybrid = {0, 1, 2};
  for (bool h : {false, true}) {
    const auto hops = version_hops(1, hybrid, h);
    expect_tree(1, hybrid, hops);
    EXPECT_EQ(inter_hops(hops), 2);
    EXPECT_EQ(hops.size(), 2u);
  }
  // 3 nodes x 4 ranks (none): flat sends 8 times between nodes, hierarchical 2.
  std::vector<int> big;
  for (int r = 0; r < 12; ++r) big.push_back(r / 4);
  expect_tree(5, big, version_hops(5, big, true));
  EXPECT_EQ(inter_hops(version_hops(5, big, false)), 8);
  EXPECT_EQ(inter_hops(version_hops(5, big, true)), 2);
}
