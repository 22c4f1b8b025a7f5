#pragma once
// What a training process of a config holds in memory, and the startup check against the
// machine's (runtime.memory_limit): a run that cannot fit is refused with the figures before it
// allocates anything, instead of being killed by the kernel part way.
//
// The estimate is the --dry-run's: fp32 parameters and gradients, the optimizer state the tiers
// keep in memory (the device and host tiers' homes and the device cache region; what is homed on
// the disk tier is not counted), the rest of the optimizer's buffers, and the activations of one
// micro-batch. With W ranks it is one rank's (train/estimates/world_plan.hpp), times the ranks sharing the
// machine.
#include <cstdint>
#include <string>

#include "config/config.hpp"
#include "train/tier_config.hpp"

namespace asteria {

struct MemoryEstimate {
  // params: in memory (runtime.tiers.params.home disk: the embedding, the head and the buffers
  // of the blocks in flight; fsdp/param_offload.hpp).
  double params = 0, grads = 0;
  double params_on_disk = 0;     // the blocks' parameters on the disk tier (not counted)
  double optimizer = 0;          // in memory (device + host tiers, device cache, buffers)
  double optimizer_on_disk = 0;  // homed on the disk tier (not counted)
  double activations = 0;
  // Working buffers of the second-order steps and refreshes: each compute thread's scratch (the
  // algorithms' temporaries, its gradient block and update direction); in native mode each compute thread's job (the largest block's factors and
  // bases in fp64) and eigensolver workspace; in asteria mode the shadow pipeline's workspaces
  // (per worker) and jobs open (one per compute thread while synchronous refreshes run; after
  // runtime.shadow.sync_steps, D + 1 steps' worth of refreshes; at most runtime.shadow.resident_jobs).
  double refresh_work = 0;
  double jobs_on_disk = 0;       // refresh jobs parked on the disk tier (runtime.shadow.resident_jobs; not counted)
  double total() const { return params + grads + optimizer + activations + refresh_work; }
};

// The config as the estimates plan a launch of `world` ranks, `ranks_per_node` to a node
// (distributed.world_size and, unless set, ranks_per_node filled in); the config itself for one.
Config planned_launch(const Config& cfg, int world, int ranks_per_node);

// One process of a single-process run.
MemoryEstimate process_memory(const Config& cfg, TierCheck tiers = TierCheck::Planned);
// The largest rank of a launch of `world` ranks, `ranks_per_node` to a node (world > 1).
MemoryEstimate rank_memory(const Config& cfg, int world, int ranks_per_node, TierCheck tiers = TierCheck::Planned);

// What one GPU holds with runtime.backend cuda (each rank's, with several): fp32 parameters and
// gradients, the device tier's optimizer state (its homes and cache region) and the activations
// of one micro-batch (refresh_work 0: the device's scratch is not counted). A sharded launch
// (distributed.world_size > 1 with fsdp full or hybrid): its largest rank's, with its shards,
// the whole layers in flight and the receive buffer (fsdp/device_shards.hpp), and its shards'
// optimizer state. process_memory is then that rank's host side (its shards' image).
MemoryEstimate device_memory(const Config& cfg, TierCheck tiers = TierCheck::Planned);
// Throws asteria::Error, naming the config, the device, the bytes needed by part and the device's
// free bytes, when `need` exceeds them: the startup check of a GPU run, before it allocates.
void check_device_memory(const Config& cfg, const MemoryEstimate& need, uint64_t free_bytes, const std::string& device);

// The refresh buffers counted per refresh worker for a rows x cols block (the largest): its job
// (both factors and both bases or roots, fp64) and its workspace (matfn::Workspace, sized for
// the largest side n).
double refresh_job_bytes(int64_t rows, int64_t cols);
double refresh_workspace_bytes(int64_t n);

// The memory this process may still take: the binding one of MemAvailable, its cgroup's room
// and RLIMIT_AS (core/memory_limits.hpp); 0 when none can be read.
uint64_t available_memory_bytes();

// runtime.memory_limit in bytes for a process on a machine shared by `ranks_on_machine` ranks:
// auto: the binding limit of core/memory_limits.hpp, the shared ones (MemAvailable, the cgroup's
// room) divided among the ranks (UINT64_MAX when none is known); unlimited: UINT64_MAX.
uint64_t memory_limit_bytes(const Config& cfg, int ranks_on_machine);
// Where that limit comes from, for messages: "runtime.memory_limit auto: cgroup v2 (FILE) over 2 ranks".
std::string memory_limit_source(const Config& cfg, int ranks_on_machine);

// Throws asteria::Error, naming the config, the bytes needed by part and the limit, when
// `need` exceeds the limit.
void check_memory(const Config& cfg, const MemoryEstimate& need, int ranks_on_machine);

// "1.50 GiB".
std::string human_bytes(double bytes);

}  // namespace asteria
