#include "train/rank_device.hpp"

#include <sstream>
#include <vector>

#include <cstdlib>

#include "comm/topology.hpp"
#include "core/backend.hpp"
#include "core/error.hpp"

namespace asteria {

std::string rank_visible_devices(int local_rank, int ranks_per_node, const char* visible) {
  ASTERIA_ASSERT(local_rank >= 0 && local_rank < ranks_per_node, "local rank ", local_rank, " of ", ranks_per_node);
  if (!visible || !*visible) return std::to_string(local_rank);
  std::vector<std::string> entries;
  std::stringstream list(visible);
  for (std::string e; std::getline(list, e, ',');)
    if (!e.empty()) entries.push_back(e);
  if (entries.size() == 1) return entries[0];
  ASTERIA_CHECK(entries.size() >= static_cast<size_t>(ranks_per_node), "runtime.backend cuda: CUDA_VISIBLE_DEVICES='",
                visible, "' lists ", entries.size(), " GPU(s) for the ", ranks_per_node,
                " ranks on this node; each rank needs its own GPU (start one rank per GPU, or list one per rank)");
  return entries[static_cast<size_t>(local_rank)];
}

}  // namespace asteria

namespace asteria {

void select_rank_device(const Topology& topo, int rank, int world) {
  std::string where;
  if (world > 1) {
    const std::string mine = rank_visible_devices(topo.local_rank, topo.ranks_per_node, std::getenv("CUDA_VISIBLE_DEVICES"));
    setenv("CUDA_VISIBLE_DEVICES", mine.c_str(), 1);
    where = "rank " + std::to_string(rank) + " (local rank " + std::to_string(topo.local_rank) + " of " +
            std::to_string(topo.ranks_per_node) + ", CUDA_VISIBLE_DEVICES=" + mine + "): ";
  }
  if (std::string why; !cuda_backend_available(&why)) fail("runtime.backend cuda: ", where, why);
}

}  // namespace asteria
