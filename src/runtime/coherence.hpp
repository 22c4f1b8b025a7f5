#pragma once
// The coherence protocol (docs/DESIGN.md "Runtime subsystems", Coherence): where the optimizer state
// is replicated (fsdp none: over all ranks; hybrid: across nodes), each preconditioner block has
// one owner among its replicas (assign_owners: balanced by refresh cost), and only the owner
// computes its refreshes (the shadow pipeline skips the others). At a refresh's publish step,
// at the block's refresh point on every replica (all in the same block order):
//   the owner decides by the registry's rule (coherence_registry.hpp; with
//   runtime.coherence.tolerance on, by the job's change from the roots or bases installed when it
//   was snapshotted, RefreshJob::change, which owners compute whatever the tolerance so that the
//   metrics show it) and sends a control message (the decision, the job's
//   status, change and sizes) along the version's hops (coherence_routes.hpp),
//   followed by the payload when it ships: the refreshed bases, roots and permutations in fp32,
//   which is exactly what the install keeps (it rounds the job's fp64 to fp32), so every
//   replica installs the same bits the owner does;
//   every replica records the decision in its registry and installs the version when shipped,
//   at this same step (the owner too, not earlier).
// Decisions depend only on the config and computed values, so runs are reproducible, and the
// registry goes into checkpoints.
//
// The shadow pipeline runs the syncs of a step's publishes as coherence_sync ops on the comm lane,
// and those of a warm-up refresh (published at once) at its refresh point on the compute lane's
// calling thread, in block order, outside the optimizer's thread team (RefreshPolicy::exchanges_at);
// never two at once (a second caller while one runs is an Error: a bug). The protocol's messages
// travel on a duplicate of the replica group of their own (no other lane's message can match
// them), tagged by (block, version), and each control message names its block and version, which
// the receiver checks: messages that crossed are an Error naming both, never a wrong install.
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "comm/communicator.hpp"
#include "core/step_metrics.hpp"
#include "runtime/executor.hpp"
#include "optim/blocks.hpp"
#include "optim/preconditioner.hpp"
#include "runtime/coherence_registry.hpp"
#include "runtime/coherence_routes.hpp"

namespace asteria {

// Per step (since the last take), what this rank sent.
struct CoherenceTraffic {
  size_t bytes_intra = 0, bytes_inter = 0;
};

// Since the last take, the changes of the versions this rank's replica group decided on (the
// owners' RefreshJob::change, carried in the control messages; versions without an installed
// state to compare with are left out): what runtime.coherence.tolerance would be compared with.
struct VersionChanges {
  int64_t versions = 0;
  double sum = 0, max = 0;
};

class Coherence {
 public:
  // replicas: the replica group (every rank of it constructs this, collectively; the protocol
  // talks on a duplicate of it); node: this rank's node; blocks: this rank's optimizer blocks per
  // layer (alike on every replica).
  Coherence(CoherenceRule rule, bool hierarchical, Communicator& replicas, int node,
            const std::vector<std::vector<MatrixBlock>>& blocks);

  int replica_rank() const { return replicas_->rank(); }
  int owner(int layer, int block) const { return owners_[index(layer, block)]; }
  bool owns(int layer, int block) const { return owner(layer, block) == replicas_->rank(); }
  CoherenceRegistry& registry() { return registry_; }
  const CoherenceRegistry& registry() const { return registry_; }
  int index(int layer, int block) const { return first_[layer] + block; }

  // The version of (layer, block) computed from the factors of step `from_step`: on the owner
  // `job` holds it (computed, with its change when the tolerance is on); on the others `job`
  // receives it when shipped. Every replica calls it in the same order. Returns whether to
  // install it.
  bool sync(int layer, int block, int64_t from_step, RefreshJob& job);
  // Between steps (a checkpoint): the owner's computed refresh to replica `to`, which receives
  // it into `job` (other ranks do nothing).
  void send_to(int layer, int block, int to, RefreshJob& job);

  CoherenceTraffic take_traffic();
  VersionChanges take_changes();
  // The step's coherence figures (coherence_metrics.cpp): bytes each rank sent (summed), the
  // versions shipped and skipped (counted by one replica per replica group), the comm lane's
  // time in the syncs and the staleness of rank 0's group at `step`.
  void record_metrics(StepMetrics& metrics, const Executor& executor, int64_t step);

  // Bytes of a version's payload (fp32 bases, roots and permutations) for a block of this size
  // and algorithm; the control message is kControlBytes.
  static size_t payload_bytes(OptimizerKind algorithm, int64_t rows, int64_t cols);
  static constexpr size_t kControlBytes = 13 * sizeof(int64_t);

 private:
  struct Control {
    int64_t block = -1, version = -1;   // what the message carries, checked by the receiver
    int64_t ship = 0, status = 0, rows = 0, cols = 0;
    double change = -1;
    int64_t sizes[6] = {};   // left/right basis, left/right root, left/right perm
  };
  static_assert(sizeof(Control) == kControlBytes);
  class Exclusive;
  void pack(const RefreshJob& job, Control& c);
  void unpack(const Control& c, RefreshJob& job) const;
  // Runs the hops of version `version` of block b (0: a checkpoint's hand-off): receive from
  // this rank's parent, then send to its children.
  void relay(const std::vector<VersionHop>& hops, Control& c, int b, int64_t version, const std::string& label);
  int tag(int b, int64_t version) const;

  std::unique_ptr<Communicator> replicas_;   // the replica group's duplicate, the protocol's own
  std::atomic<bool> busy_{false};            // a sync or hand-off is running
  std::vector<int> node_of_;
  std::vector<int> first_;               // per layer: its first block's index
  std::vector<int> owners_;              // per block
  std::vector<std::vector<VersionHop>> hops_;   // per owner
  CoherenceRegistry registry_;
  std::vector<float> payload_;           // the version in flight (grows once, then reused)
  std::vector<std::string> names_;       // per block, for messages
  CoherenceTraffic traffic_;
  VersionChanges changes_;
};

}  // namespace asteria
