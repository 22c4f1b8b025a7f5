#include "runtime/coherence_routes.hpp"

#include <algorithm>
#include <map>
#include <numeric>

#include "core/error.hpp"

namespace asteria {

std::vector<int> assign_owners(const std::vector<double>& costs, int replicas) {
  ASTERIA_ASSERT(replicas >= 1);
  std::vector<int> order(costs.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return costs[a] > costs[b]; });
  std::vector<double> load(static_cast<size_t>(replicas), 0.0);
  std::vector<int> owner(costs.size(), 0);
  for (int b : order) {
    const int r = static_cast<int>(std::min_element(load.begin(), load.end()) - load.begin());
    owner[b] = r;
    load[r] += costs[b];
  }
  return owner;
}

std::vector<VersionHop> version_hops(int owner, const std::vector<int>& node_of, bool hierarchical) {
  const int R = static_cast<int>(node_of.size());
  ASTERIA_ASSERT(owner >= 0 && owner < R);
  std::vector<VersionHop> hops;
  if (!hierarchical) {
    for (int r = 0; r < R; ++r)
      if (r != owner) hops.push_back({owner, r, node_of[r] != node_of[owner]});
    return hops;
  }
  std::map<int, int> leader;   // node -> its lowest replica
  for (int r = R - 1; r >= 0; --r) leader[node_of[r]] = r;
  const int home = node_of[owner], home_leader = leader[home];
  if (owner != home_leader) hops.push_back({owner, home_leader, false});
  for (const auto& [node, l] : leader)
    if (node != home) hops.push_back({home_leader, l, true});
  for (int r = 0; r < R; ++r) {
    const int l = leader[node_of[r]];
    if (r != l && r != owner) hops.push_back({l, r, false});
  }
  return hops;
}

}  // namespace asteria
