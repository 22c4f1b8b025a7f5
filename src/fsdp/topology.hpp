#pragma once
// World = nodes x ranks_per_node (DESIGN.md "FSDP"). ranks_per_node comes from MPI (the ranks
// sharing this rank's memory, MPI_Comm_split_type), or from distributed.ranks_per_node when set,
// so that one machine can stand in for several nodes in tests. Ranks are numbered node by node
// (rank = node * ranks_per_node + local_rank, as mpirun and srun place them by default).
//   intra  the ranks of this node (hybrid sharding's shard group; coherence's first level)
//   inter  the ranks with this local rank, one per node (node leaders when local_rank is 0)
#include <memory>

#include "fsdp/communicator.hpp"

namespace asteria {

struct Topology {
  int world_size = 1, rank = 0;
  int ranks_per_node = 1, nodes = 1, node = 0, local_rank = 0;
  Communicator* world = nullptr;
  std::unique_ptr<Communicator> intra, inter;
  std::unique_ptr<Communicator> owned_world;   // when make_topology was given ownership
  void set_timeout(double seconds);            // of all three
};

// Every rank calls it (it splits the world communicator). ranks_per_node_override 0: from the
// world's shared-memory ranks. An Error when the world is not a whole number of nodes. The
// first form borrows `world` (it must outlive the topology), the second owns it.
Topology make_topology(Communicator& world, int ranks_per_node_override);
Topology make_topology(std::unique_ptr<Communicator> world, int ranks_per_node_override);

}  // namespace asteria
