#pragma once
// The coherence registry (docs/DESIGN.md "Runtime subsystems", Coherence): where optimizer state is
// replicated, one owner computes each block's refreshes, and every computed version is either
// shipped to the replicas and adopted by all of them at one step, or dropped. Per block the
// registry holds the adopted version and the newest computed one; the rule, with
// runtime.coherence.staleness S (>= 1) and tolerance tau (the new version's relative change from
// the adopted one, BlockPreconditioner::refresh_change; 0 = off):
//
//   ship version n  iff  adopted = 0 (none yet: the block's first version)
//                        or  n - adopted >= S  or  (tau > 0 and distance(n, adopted) > tau)
//
// so the adopted version is never more than S - 1 versions behind after a decision, S = 1 ships
// every version (synchronous replication), and a large change goes out early. The first version
// always ships: without it, S = k keeps every block on its initial state (SOAP: the identity
// basis) for k refresh periods, which cost SOAP ~12 % of its final loss at S = 5. Decisions depend
// only on counts, the config and computed values: the same on every replica (the owner's travels
// with its control message), the same in every run.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/stateful.hpp"

namespace asteria {

struct CoherenceRule {
  int staleness = 1;        // S
  double tolerance = 0;     // tau; 0: off
  // runtime.coherence.tolerance when staleness > 1 and none is given. Measured on bench-small SOAP
  // over 400 steps (bench/results/coherence-seeds): S = 5 alone ends +11 % above S = 1's final eval
  // loss; with tau 0.3 it ships ~0.42 of the bytes and ends within 0.5 % (two seeds), with tau 0.5
  // 0.27 of the bytes at +1.6 %. SOAP's versions move by 0.2-0.4 from one refresh to the next in
  // such a run, so 0.3 lets a block skip a version only while its bases hold.
  static constexpr double kDefaultTolerance = 0.3;
  // behind: versions the new one is ahead of the adopted one (>= 1); distance: its relative
  // distance to the adopted one (ignored when tau is off).
  bool ship(int64_t behind, double distance) const {
    return behind >= staleness || (tolerance > 0 && distance > tolerance);
  }
};

// One block's versions.
struct BlockVersions {
  int64_t adopted = 0;        // the version every replica uses (0: the initial state)
  int64_t newest = 0;         // the newest computed (>= adopted)
  int64_t adopted_step = 0;   // the step whose factors the adopted version was computed from
};

// Staleness over the blocks at a step: how far the adopted versions are behind the newest
// computed ones (versions), and how old their factors are (steps).
struct Staleness {
  int64_t max_versions = 0;
  double mean_versions = 0;
  int64_t max_steps = 0;
  double mean_steps = 0;
};

// Stateful ("coherence"): one field per block, named by name_blocks, of [adopted, newest,
// adopted_step]. A checkpoint without a block's field (of a run without replicas) leaves it at
// its initial versions.
class CoherenceRegistry final : public Stateful {
 public:
  CoherenceRegistry(CoherenceRule rule, int blocks);
  const CoherenceRule& rule() const { return rule_; }
  int blocks() const { return static_cast<int>(versions_.size()); }
  const BlockVersions& block(int b) const { return versions_[b]; }
  void set_block(int b, const BlockVersions& v) { versions_.at(static_cast<size_t>(b)) = v; }
  // The blocks' names in checkpoints (default: their index), which must not depend on the rank
  // or sharding (the shadow pipeline names them by layer and whole-layer block).
  void name_blocks(std::vector<std::string> names);

  std::string state_name() const override { return "coherence"; }
  void save_state(StateWriter& out) override;
  void load_state(const StateReader& in) override;

  // Whether the next version of block b, at `distance` from the adopted one, is shipped (the
  // owner's decision; the registry is unchanged).
  bool decide(int b, double distance) const;
  // The next version of block b, computed from the factors of step `from_step`, was shipped
  // (and adopted) or dropped: every replica records the owner's decision.
  void record(int b, int64_t from_step, bool shipped);
  // decide() then record(); returns the decision.
  bool computed(int b, int64_t from_step, double distance);

  // At `step`: staleness over the blocks, and since the last call the versions shipped and the
  // versions dropped (skipped: never adopted).
  Staleness staleness(int64_t step) const;
  int64_t take_shipped();
  int64_t take_skipped();

 private:
  CoherenceRule rule_;
  std::vector<BlockVersions> versions_;
  std::vector<std::string> names_;   // per block, in checkpoints
  int64_t shipped_ = 0, skipped_ = 0;
};

}  // namespace asteria
