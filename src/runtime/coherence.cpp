#include "runtime/coherence.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <utility>

#include "core/error.hpp"

namespace asteria {

namespace {

// The job's output vectors, in the control message's order.
template <class Job>
auto outputs(Job& job) {
  return std::array<decltype(&job.left_basis), 4>{&job.left_basis, &job.right_basis, &job.left_root, &job.right_root};
}
template <class Job>
auto perms(Job& job) {
  return std::array<decltype(&job.left_perm), 2>{&job.left_perm, &job.right_perm};
}

}  // namespace

// One sync or hand-off at a time (coherence.hpp): payload_ and the registry are not shared.
class Coherence::Exclusive {
 public:
  Exclusive(std::atomic<bool>& busy, const std::string& what) : busy_(busy) {
    ASTERIA_ASSERT(!busy_.exchange(true), "coherence: ", what, " started while another sync runs (two threads in the protocol)");
  }
  ~Exclusive() { busy_ = false; }

 private:
  std::atomic<bool>& busy_;
};

Coherence::Coherence(CoherenceRule rule, bool hierarchical, Communicator& replicas, int node,
                     const std::vector<std::vector<MatrixBlock>>& blocks)
    : replicas_(replicas.duplicate()), registry_(rule, [&] {
        int n = 0;
        for (const auto& l : blocks) n += static_cast<int>(l.size());
        return n;
      }()) {
  // Every replica's node, by a sum over the group (each rank fills in its own).
  const int R = replicas_->size();
  std::vector<double> nodes(static_cast<size_t>(R), 0.0);
  nodes[static_cast<size_t>(replicas_->rank())] = node;
  Request r = replicas_->all_reduce(nodes.data(), nodes.size(), "all_reduce of the replicas' nodes");
  replicas_->wait(r);
  for (double x : nodes) node_of_.push_back(static_cast<int>(x));
  std::vector<double> costs;
  for (const auto& layer : blocks) {
    first_.push_back(static_cast<int>(costs.size()));
    for (const MatrixBlock& b : layer) {
      costs.push_back(static_cast<double>(b.rows) * b.rows * b.rows + static_cast<double>(b.cols) * b.cols * b.cols);
      names_.push_back(b.name);
    }
  }
  owners_ = assign_owners(costs, R);
  for (int o = 0; o < R; ++o) hops_.push_back(version_hops(o, node_of_, hierarchical));
}

size_t Coherence::payload_bytes(OptimizerKind algorithm, int64_t rows, int64_t cols) {
  return sizeof(float) * refresh_payload_floats(algorithm, rows, cols);
}

void Coherence::pack(const RefreshJob& job, Control& c) {
  c.status = static_cast<int64_t>(job.status);
  c.change = job.change;
  c.rows = job.rows;
  c.cols = job.cols;
  size_t total = 0, k = 0;
  for (const auto* v : outputs(job)) total += (c.sizes[k++] = static_cast<int64_t>(v->size()));
  for (const auto* v : perms(job)) total += (c.sizes[k++] = static_cast<int64_t>(v->size()));
  payload_.resize(total);
  float* out = payload_.data();
  // fp32, as the install keeps them; permutation indices (< 2^24) are exact in fp32.
  for (const auto* v : outputs(job)) out = std::transform(v->begin(), v->end(), out, [](double x) { return static_cast<float>(x); });
  for (const auto* v : perms(job)) out = std::transform(v->begin(), v->end(), out, [](int x) { return static_cast<float>(x); });
}

void Coherence::unpack(const Control& c, RefreshJob& job) const {
  job.status = static_cast<matfn::Status>(c.status);
  job.change = c.change;
  job.rows = c.rows;
  job.cols = c.cols;
  const float* in = payload_.data();
  size_t k = 0;
  for (auto* v : outputs(job)) {
    v->resize(static_cast<size_t>(c.sizes[k++]));
    std::transform(in, in + v->size(), v->begin(), [](float x) { return static_cast<double>(x); });
    in += v->size();
  }
  for (auto* v : perms(job)) {
    v->resize(static_cast<size_t>(c.sizes[k++]));
    std::transform(in, in + v->size(), v->begin(), [](float x) { return static_cast<int>(x); });
    in += v->size();
  }
}

int Coherence::tag(int b, int64_t version) const {
  // 16 versions of each block apart; tag 0 unused. Two messages with one tag between two ranks
  // arrive in the order sent, and the control message's header is checked besides.
  const int64_t span = replicas_->max_tag();
  return static_cast<int>(1 + (static_cast<int64_t>(b) * 16 + version % 16) % span);
}

void Coherence::relay(const std::vector<VersionHop>& hops, Control& c, int b, int64_t version,
                      const std::string& label) {
  Communicator& comm = *replicas_;
  const int me = comm.rank(), t = tag(b, version);
  // Receive first (each replica but the owner, once), then pass it on: the hops are listed in
  // dependency order and every rank walks them the same way, so no cycle can wait.
  for (const VersionHop& h : hops) {
    if (h.to != me) continue;
    Request r = comm.recv(&c, sizeof c, h.from, t, "recv of the control message of " + label);
    comm.wait(r);
    if (c.block != b || c.version != version)
      fail("coherence: replica ", me, " expected version ", version, " of ", names_[b], " from replica ", h.from,
           " and received version ", c.version, " of block ", c.block,
           c.block >= 0 && c.block < static_cast<int64_t>(names_.size()) ? " (" + names_[c.block] + ")" : std::string(),
           ": the replicas' protocol messages crossed");
    if (c.ship) {
      size_t total = 0;
      for (int64_t s : c.sizes) total += static_cast<size_t>(s);
      payload_.resize(total);
      r = comm.recv(payload_.data(), total * sizeof(float), h.from, t, "recv of " + label);
      comm.wait(r);
    }
  }
  std::vector<Request> sent;
  for (const VersionHop& h : hops) {
    if (h.from != me) continue;
    c.block = b;
    c.version = version;
    sent.push_back(comm.send(&c, sizeof c, h.to, t, "send of the control message of " + label));
    size_t bytes = sizeof c;
    if (c.ship) {
      sent.push_back(comm.send(payload_.data(), payload_.size() * sizeof(float), h.to, t, "send of " + label));
      bytes += payload_.size() * sizeof(float);
    }
    (h.inter ? traffic_.bytes_inter : traffic_.bytes_intra) += bytes;
  }
  for (Request& r : sent) comm.wait(r);
}

bool Coherence::sync(int layer, int block, int64_t from_step, RefreshJob& job) {
  const int b = index(layer, block), owner = owners_[b];
  const Exclusive one(busy_, "the sync of " + names_[b]);
  Control c;
  if (owner == replicas_->rank()) {
    ASTERIA_ASSERT(registry_.rule().tolerance == 0 || job.change >= 0, "version of ", names_[b], " without its change");
    c.ship = registry_.decide(b, job.change) ? 1 : 0;
    pack(job, c);
  }
  // The version computed now is the registry's next one, the same count on every replica.
  relay(hops_[owner], c, b, registry_.block(b).newest + 1, "version of " + names_[b]);
  registry_.record(b, from_step, c.ship != 0);
  if (c.change >= 0 && std::isfinite(c.change)) {
    ++changes_.versions;
    changes_.sum += c.change;
    changes_.max = std::max(changes_.max, c.change);
  }
  if (owner != replicas_->rank() && c.ship) unpack(c, job);
  return c.ship != 0;
}

void Coherence::send_to(int layer, int block, int to, RefreshJob& job) {
  const int b = index(layer, block), owner = owners_[b], me = replicas_->rank();
  if (owner == to || (me != owner && me != to)) return;
  const Exclusive one(busy_, "the checkpoint's hand-off of " + names_[b]);
  Control c;
  const std::string label = "refresh state of " + names_[b] + " for the checkpoint";
  const CoherenceTraffic protocol = traffic_;   // a checkpoint's hand-off is not the protocol's traffic
  if (me == owner) {
    c.ship = 1;
    pack(job, c);
    relay({{owner, to, node_of_[owner] != node_of_[to]}}, c, b, 0, label);
  } else {
    relay({{owner, to, node_of_[owner] != node_of_[to]}}, c, b, 0, label);
    unpack(c, job);
  }
  traffic_ = protocol;
}

VersionChanges Coherence::take_changes() { return std::exchange(changes_, VersionChanges{}); }

CoherenceTraffic Coherence::take_traffic() {
  const CoherenceTraffic t = traffic_;
  traffic_ = CoherenceTraffic{};
  return t;
}

}  // namespace asteria
