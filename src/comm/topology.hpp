#pragma once
// World = nodes x ranks_per_node (docs/DESIGN.md "FSDP"). The nodes are the hosts the ranks run on
// (each rank's hostname, gathered at startup): node k is the k-th distinct host in rank order,
// and a rank's local rank is its place among the ranks of its host, so any placement of ranks on
// hosts works (by slot or round-robin). distributed.ranks_per_node overrides it (one machine
// standing in for several nodes in tests): rank = node * ranks_per_node + local_rank; a rank 0
// note says where the override contradicts the hosts.
//   intra  the ranks of this node (hybrid sharding's shard group; coherence's first level)
//   inter  the ranks with this local rank, one per node (node leaders when local_rank is 0)
// With hosts of unequal rank counts, ranks_per_node is this rank's host's count and `uniform` is
// false (hybrid sharding refuses it, naming the hosts).
#include <memory>
#include <string>
#include <vector>

#include "comm/communicator.hpp"

namespace asteria {

struct Topology {
  int world_size = 1, rank = 0;
  int ranks_per_node = 1, nodes = 1, node = 0, local_rank = 0;
  bool uniform = true;                 // every node has ranks_per_node ranks
  std::vector<std::string> hosts;      // per world rank: the host it runs on
  std::vector<int> node_of;            // per world rank
  std::string note;                    // the override against the hosts, when they disagree
  Communicator* world = nullptr;
  std::unique_ptr<Communicator> intra, inter;
  std::unique_ptr<Communicator> owned_world;   // when make_topology was given ownership
  void set_timeout(double seconds);            // of all three
  // "node1 (ranks 0-1), node2 (ranks 2-3)": the hosts and their ranks, for messages.
  std::string describe_hosts() const;
};

// Every rank calls it (it gathers the hosts and splits the world communicator).
// ranks_per_node_override 0: from the hosts. An Error when the override does not divide the
// world into whole nodes. The first form borrows `world` (it must outlive the topology), the
// second owns it.
Topology make_topology(Communicator& world, int ranks_per_node_override);
Topology make_topology(std::unique_ptr<Communicator> world, int ranks_per_node_override);

// Each rank's hostname, gathered over `comm` (every rank calls it).
std::vector<std::string> gather_hostnames(Communicator& comm);

}  // namespace asteria
