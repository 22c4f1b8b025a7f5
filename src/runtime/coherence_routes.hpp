#pragma once
// Who computes a replicated block's refreshes and how its versions reach the other replicas
// (docs/DESIGN.md "Runtime subsystems", Coherence). Replicas are the ranks of a replica group
// (fsdp none: every rank; hybrid: one rank per node, those with the same local rank), numbered
// 0 .. R-1, each on a node (node_of). Pure functions of the blocks and the topology, so every
// rank computes the same owners and routes.
#include <cstdint>
#include <vector>

namespace asteria {

// Owners balanced by refresh cost (rows^3 + cols^3 per block, not bytes): the blocks by cost,
// largest first (ties: lower index), each to the replica with the least cost so far (ties:
// lower rank). costs: per block. Returns each block's owner.
std::vector<int> assign_owners(const std::vector<double>& costs, int replicas);

// One hop of a version: `from` sends it to `to`. Hops are listed in an order that respects
// their dependencies (a rank forwards only what it has received).
struct VersionHop {
  int from = 0, to = 0;
  bool inter = false;   // between nodes
};

// hierarchical (runtime.coherence.hierarchical): the owner sends to its node's leader (the
// lowest replica on the node) inside the node; that leader sends once to every other node's
// leader; each leader hands the version to the other replicas of its node. Flat: the owner
// sends to every other replica itself. Either way every replica but the owner receives exactly
// once.
std::vector<VersionHop> version_hops(int owner, const std::vector<int>& node_of, bool hierarchical);

}  // namespace asteria
