#include "comm/topology.hpp"

#include <unistd.h>

#include <algorithm>
#include <map>

#include "core/error.hpp"

namespace asteria {

std::vector<std::string> gather_hostnames(Communicator& comm) {
  constexpr size_t kMax = 64;   // HOST_NAME_MAX on Linux
  char name[kMax + 1] = {};
  gethostname(name, kMax);
  // Each rank writes its name's bytes into its own slot of a sum (collectives of the
  // communicator interface; a few hundred bytes per rank, once).
  const int W = comm.size(), me = comm.rank();
  std::vector<double> table(static_cast<size_t>(W) * kMax, 0.0);
  for (size_t i = 0; i < kMax && name[i]; ++i) table[me * kMax + i] = static_cast<unsigned char>(name[i]);
  Request r = comm.all_reduce(table.data(), table.size(), "the ranks' hostnames");
  comm.wait(r);
  std::vector<std::string> out(static_cast<size_t>(W));
  for (int q = 0; q < W; ++q)
    for (size_t i = 0; i < kMax && table[q * kMax + i] != 0; ++i) out[q] += static_cast<char>(table[q * kMax + i]);
  return out;
}

namespace {

// "0-3" or "0, 2" style list of ranks.
std::string rank_list(const std::vector<int>& ranks) {
  std::string s;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    s += (s.empty() ? "" : ", ") + std::to_string(ranks[i]) + (j > i ? "-" + std::to_string(ranks[j]) : "");
    i = j + 1;
  }
  return s;
}

}  // namespace

std::string Topology::describe_hosts() const {
  std::vector<std::string> order;
  std::map<std::string, std::vector<int>> ranks;
  for (int r = 0; r < static_cast<int>(hosts.size()); ++r) {
    if (hosts[r].empty()) continue;   // not a member
    if (ranks[hosts[r]].empty()) order.push_back(hosts[r]);
    ranks[hosts[r]].push_back(r);
  }
  std::string s;
  for (const std::string& h : order)
    s += (s.empty() ? "" : ", ") + h + " (rank" + (ranks[h].size() > 1 ? "s " : " ") + rank_list(ranks[h]) + ")";
  return s;
}

Topology make_topology(Communicator& world, int ranks_per_node_override) {
  Topology t;
  t.world_size = world.size();
  t.rank = world.rank();
  t.world = &world;
  t.hosts = gather_hostnames(world);
  // The hosts' nodes: distinct hostnames in rank order.
  std::vector<std::string> order;
  std::vector<int> host_node(static_cast<size_t>(t.world_size)), host_local(static_cast<size_t>(t.world_size));
  std::vector<int> count;
  for (int r = 0; r < t.world_size; ++r) {
    auto it = std::find(order.begin(), order.end(), t.hosts[r]);
    const int n = static_cast<int>(it - order.begin());
    if (it == order.end()) {
      order.push_back(t.hosts[r]);
      count.push_back(0);
    }
    host_node[r] = n;
    host_local[r] = count[n]++;
  }
  if (ranks_per_node_override > 0) {
    const int rpn = ranks_per_node_override;
    if (t.world_size % rpn != 0)
      fail("distributed.ranks_per_node = ", rpn, " does not divide the ", t.world_size, " ranks into whole nodes");
    t.ranks_per_node = rpn;
    t.nodes = t.world_size / rpn;
    for (int r = 0; r < t.world_size; ++r) t.node_of.push_back(r / rpn);
    t.node = t.rank / rpn;
    t.local_rank = t.rank % rpn;
    // Where the override groups ranks otherwise than their hosts do.
    bool agrees = static_cast<int>(order.size()) == t.nodes;
    for (int r = 0; agrees && r < t.world_size; ++r)
      for (int q = 0; agrees && q < r; ++q) agrees = (t.node_of[r] == t.node_of[q]) == (host_node[r] == host_node[q]);
    if (!agrees)
      t.note = "distributed.ranks_per_node " + std::to_string(rpn) + " makes " + std::to_string(t.nodes) + " node(s) of " +
               std::to_string(rpn) + " ranks in rank order, but the ranks run on " + std::to_string(order.size()) +
               " host(s): " + t.describe_hosts() + "; the override is used (leave it unset to follow the hosts)";
  } else {
    t.nodes = static_cast<int>(order.size());
    t.node_of = host_node;
    t.node = host_node[t.rank];
    t.local_rank = host_local[t.rank];
    t.ranks_per_node = count[t.node];
    t.uniform = std::all_of(count.begin(), count.end(), [&](int c) { return c == count[0]; });
  }
  t.intra = world.split(t.node, t.local_rank);
  t.inter = world.split(t.local_rank, t.node);
  // Who each communicator's ranks are, for its timeouts' messages.
  const auto members = [&](auto in_group) {
    Topology part;
    for (int r = 0; r < t.world_size; ++r) part.hosts.push_back(in_group(r) ? t.hosts[r] : "");
    return part.describe_hosts();
  };
  world.describe_members(t.describe_hosts());
  t.intra->describe_members(members([&](int r) { return t.node_of[r] == t.node; }));
  t.inter->describe_members(members([&](int r) {
    return ranks_per_node_override > 0 ? r % t.ranks_per_node == t.local_rank : host_local[r] == t.local_rank;
  }));
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
