#include "fsdp/topology.hpp"

#include "core/error.hpp"
#include "fsdp/mpi_communicator.hpp"

namespace asteria {

Topology make_topology(Communicator& world, int ranks_per_node_override) {
  Topology t;
  t.world_size = world.size();
  t.rank = world.rank();
  t.ranks_per_node = ranks_per_node_override > 0 ? ranks_per_node_override : ranks_on_this_node(world);
  if (t.world_size % t.ranks_per_node != 0)
    fail("distributed.ranks_per_node = ", t.ranks_per_node, " does not divide the ", t.world_size,
         " ranks into whole nodes");
  t.nodes = t.world_size / t.ranks_per_node;
  t.node = t.rank / t.ranks_per_node;
  t.local_rank = t.rank % t.ranks_per_node;
  t.intra = world.split(t.node, t.local_rank);
  t.inter = world.split(t.local_rank, t.node);
  t.world = &world;
  return t;
}

Topology make_topology(std::unique_ptr<Communicator> world, int ranks_per_node_override) {
  Topology t = make_topology(*world, ranks_per_node_override);
  t.owned_world = std::move(world);
  return t;
}

void Topology::set_timeout(double seconds) {
  world->set_timeout(seconds);
  intra->set_timeout(seconds);
  inter->set_timeout(seconds);
}

}  // namespace asteria
