#include "train/run_placement.hpp"

#include <algorithm>
#include <cstdio>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "comm/communicator.hpp"
#include "core/timer.hpp"
#include "fsdp/sharding.hpp"
#include "runtime/shadow.hpp"
#include "runtime/tier_manager.hpp"
#include "train/estimates/memory_estimate.hpp"
#include "train/tier_config.hpp"

namespace asteria {

namespace {

// The smallest of the ranks' limits (every rank plans the same placement).
uint64_t least_over_ranks(Communicator& comm, uint64_t mine) {
  if (comm.size() == 1) return mine;
  std::vector<double> limits(static_cast<size_t>(comm.size()), 0.0);
  limits[static_cast<size_t>(comm.rank())] = static_cast<double>(mine);
  Request r = comm.all_reduce(limits.data(), limits.size(), "the ranks' memory limits");
  comm.wait(r);
  const double least = *std::min_element(limits.begin(), limits.end());
  return least >= 1.8e19 ? UINT64_MAX : static_cast<uint64_t>(least);
}

}  // namespace

RunPlacement::RunPlacement(Config& cfg, Communicator& comm, const Topology& topo, MemoryWatch memory)
    : rank_(comm.rank()), world_(comm.size()) {
  const int ranks_here = topo.uniform ? topo.ranks_per_node : 1;
  const bool watched = cfg.runtime.placement == PlacementMode::Auto && cfg.runtime.memory_limit_auto();
  if (watched && !memory) memory = machine_memory_watch(topo.ranks_per_node);
  MemoryReading mine = watched ? memory()
                               : MemoryReading{memory_limit_bytes(cfg, topo.ranks_per_node), memory_limit_source(cfg, topo.ranks_per_node)};
  const uint64_t reading = mine.limit;
  // A machine's reading counts what the process holds already (its code, libraries, heap: some
  // 200 MiB, none of it in the estimates); the run's own memory has to fit beside it, or a tight
  // cgroup kills the process at its peak.
  if (watched && mine.held > 0 && mine.held < mine.limit && mine.limit != UINT64_MAX) {
    mine.limit -= mine.held;
    mine.source += ", beside the " + human_bytes(static_cast<double>(mine.held)) + " this process holds before allocating";
  }
  const uint64_t limit = least_over_ranks(comm, mine.limit);
  if (world_ > 1) mine.source += ", the smallest over the ranks' machines";
  const TiersConfig given_tiers = cfg.runtime.tiers;
  placement_ = choose_placement(cfg, placement_inputs(cfg, world_, ranks_here, limit, mine.source));
  cfg = placement_.cfg;
  if (rank_ == 0) std::fprintf(stderr, "asteria-train: %s\n", placement_.describe().c_str());
  if (watched) watch_ = std::make_unique<PlacementWatch>(placement_, given_tiers, memory, world_, ranks_here, reading);
}

RunPlacement::~RunPlacement() = default;

void RunPlacement::adapt(int64_t step, Config& cfg, TierManager& tiers, const Sharding& sharding, ShadowPipeline* shadow) {
  if (!watch_) return;
  std::optional<Placement> next = watch_->check(placement_);
  if (!next) return;
  Timer t;
  // Only the jobs parked (ShadowPipeline::set_resident_jobs below): no state moves.
  const std::string why_not =
      same_tiers(cfg.runtime.tiers, next->cfg.runtime.tiers)
          ? std::string()
          : tiers.relayout(configured_tier_layout(next->cfg, sharding.owned_tables()),
                           disk_tier_file(cfg, std::to_string(replans_ + 1)), disk_tier_file(cfg, "spill"));
  const std::string who = world_ > 1 ? "rank " + std::to_string(rank_) + ": " : "";
  if (!why_not.empty()) {
    std::fprintf(stderr, "asteria-train: %sbefore step %lld: the memory limit is now %s (%s), but the optimizer state "
                 "could not be moved: %s; the placement stays\n", who.c_str(), static_cast<long long>(step),
                 human_bytes(static_cast<double>(next->limit)).c_str(), next->limit_source.c_str(), why_not.c_str());
    return;
  }
  placement_ = std::move(*next);
  cfg.runtime.tiers = placement_.cfg.runtime.tiers;
  // The refreshes in flight parked as well (buffers beyond the budget freed now).
  if (shadow && placement_.cfg.runtime.shadow.resident_jobs != cfg.runtime.shadow.resident_jobs) {
    cfg.runtime.shadow.resident_jobs = placement_.cfg.runtime.shadow.resident_jobs;
    shadow->set_resident_jobs(cfg.runtime.shadow.resident_jobs, disk_tier_file(cfg, "shadow-jobs"));
  }
  ++replans_;
  replan_s_ = t.seconds();
  std::fprintf(stderr, "asteria-train: %sbefore step %lld: re-placed in %.1f s (re-plan %d), %s%s\n", who.c_str(),
               static_cast<long long>(step), replan_s_, replans_, placement_.describe().c_str(),
               placement_.fits ? "" : "\n  (it does not fit even so: the run goes on and may be stopped by the kernel)");
}

void RunPlacement::record_metrics(StepMetrics& m) {
  if (!watch_) return;
  m.sum("placement_replans", replans_);
  if (replan_s_ > 0) m.local("placement_replan_s", std::exchange(replan_s_, 0.0));
}

}  // namespace asteria
