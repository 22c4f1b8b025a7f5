#pragma once
// The resolved configuration of a run: typed sections, every field with a default.
//
// Loading (load_config): YAML file -> dotted overrides (--set a.b=v) applied on the tree ->
// `model.preset` fills the model section -> every known field read with its type and range
// checked -> any key left over is an error -> `model.init_from`'s config.json sets the model's
// architecture (hf/hf_config.hpp; a key the config or its preset sets must agree with it). Every error names the key and where it came from
// (FILE:LINE, or the --set argument) and is thrown as asteria::Error.
// The field list of each section is written once (config_schema.hpp) and used both to read and
// to write the resolved config, so the two can never disagree.
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/backend.hpp"
#include "core/cpu/gemm_routing.hpp"
#include "data/token_file.hpp"
#include "fsdp/fsdp_mode.hpp"
#include "model/activation_recompute.hpp"
#include "model/model_config.hpp"
#include "optim/optim_config.hpp"
#include "runtime/runtime_options.hpp"

namespace asteria {

// train.schedule: the shape of the learning rate after the warm-up (train/lr_schedule.hpp, which
// is above the config).
enum class ScheduleKind { Cosine, Linear, Constant };
// runtime.blas: Auto switches a generic BLAS fallback to the best kernels the CPU supports
// (core/cpu/blas_kernels.hpp, after a self-check); AsIs keeps the library's choice.
enum class BlasKernels { Auto, AsIs };

inline const char* to_string(ScheduleKind k) {
  switch (k) {
    case ScheduleKind::Cosine: return "cosine";
    case ScheduleKind::Linear: return "linear";
    case ScheduleKind::Constant: return "constant";
  }
  return "?";
}
inline const char* to_string(BlasKernels b) { return b == BlasKernels::AsIs ? "as-is" : "auto"; }

// What a resume may do with a config key whose value differs from the checkpoint's (every key of
// the schema declares one: config_schema.hpp; train/checkpoint/resume_check.hpp applies them).
enum class OnResume {
  Free,        // changes no bit of the run (where and how it computes and keeps its state, logging,
               // limits, paths): accepted
  Placement,   // changes the arithmetic but not the run's meaning (what runtime.placement chooses for
               // the machine: the micro-batch split keeping the global batch, the head's chunks):
               // accepted, and said at startup
  Fixed,       // the run's meaning (the model, the optimizer, the schedule, the seed): refused unless
               // listed in checkpoint.allow_changes
};
inline const char* to_string(OnResume r) {
  switch (r) {
    case OnResume::Free: return "free";
    case OnResume::Placement: return "placement";
    case OnResume::Fixed: return "fixed";
  }
  return "?";
}

struct DataConfig {
  std::string train;            // token file for training (required to train)
  std::string eval;             // token file for evaluation ("" = no eval)
  TokenDtypeChoice dtype = TokenDtypeChoice::Auto;
  int eval_batches = 8;         // fixed eval batches of train.micro_batch instances
};

struct TrainConfig {
  int64_t steps = 100;
  int micro_batch = 8;          // instances per micro-batch
  int grad_accum = 1;           // micro-batches per optimizer step
  int eval_every = 0;           // 0 = only at the end (when data.eval is set)
  ScheduleKind schedule = ScheduleKind::Cosine;
  int64_t warmup_steps = 0;
  double final_lr_fraction = 0.1;    // lr at the last step = lr * this
  int64_t stop_after = 0;       // stop (with a checkpoint) after this step, the schedule still
                                // that of train.steps; 0 = run to train.steps
  // Which blocks recompute their activations for the backward instead of keeping them
  // (model/activation_recompute.hpp): none, blocks (all), every_k (blocks 0, k, 2k, ...).
  // Formerly activation_checkpointing / checkpoint_every_k, still read (with a note).
  ActivationRecompute::Mode activation_recompute = ActivationRecompute::Mode::None;
  int recompute_every_k = 2;
  ActivationRecompute recompute() const { return {activation_recompute, recompute_every_k}; }
};

// The shadow pipeline (runtime.mode asteria): roots / bases on host workers, published with a
// fixed delay.
// Defaults measured on bench-small / 2 cores (bench/results/runtime-profile-150): one worker or
// D = 1 leaves root jobs unfinished at their publish step (stalls); D = 3 with 2 workers does not.
struct ShadowConfig {
  int threads = 2;              // host worker threads (low OS priority)
  // workers: root jobs on the host workers; compute: in parts, in a batch on the compute lane's
  // threads (same results); device (runtime.backend cuda): the workers hand each job to the GPU's
  // solvers (cuSOLVER) on a low-priority stream of their own; auto: workers when they have cores
  // of their own, else compute.
  ShadowLane lane = ShadowLane::Auto;
  int64_t delay = 3;            // D: a snapshot of step t is published at step t + D
  int64_t sync_steps = -1;      // refreshes opened at steps <= this publish at once (the bases
                                // move fastest early); -1 = train.warmup_steps
  // At most this many refresh jobs' fp64 buffers in memory; the jobs waiting beyond it are
  // parked on the disk tier (runtime/shadow_job_store.hpp). 0: all in memory. Chosen by
  // runtime.placement auto when the refreshes in flight do not fit.
  int resident_jobs = 0;
  double worker_delay_ms = 0;   // for tests: every root job first sleeps this long
};

// Byte budgets of the tiered state manager (runtime/tier_layout.hpp). A size is a number of
// bytes with an optional unit (KiB, MiB, GiB, TiB, KB, MB, GB, TB), or "unlimited".
struct TierBudgetConfig {
  std::string bytes = "unlimited";
};
struct DiskTierConfig {
  std::string bytes = "unlimited";
  std::string path;             // directory of the disk tier's file; "" = <run.dir>/tiers
};
// The model's parameters (fsdp/param_offload.hpp): the blocks' in memory, or on the disk tier
// and read a layer at a time ahead of each use (chosen by runtime.placement auto after every
// other step).
struct ParamsTierConfig {
  ParamsHome home = ParamsHome::Memory;
  int prefetch_distance = 1;    // disk: uses of offloaded layers a read runs ahead of (buffers: + 1)
};
struct TiersConfig {
  TierBudgetConfig device;      // on the CPU backend: a budgeted host arena
  TierBudgetConfig host;
  DiskTierConfig disk;
  int prefetch_distance = 2;    // layers of the optimizer order prefetched ahead of use
  ParamsTierConfig params;
};

// Replicated optimizer state (runtime/coherence.hpp, docs/DESIGN.md "Runtime subsystems"): in
// asteria mode with replicas, each block's refreshes run on one owner and its versions are
// shipped to the others by this rule.
struct CoherenceConfig {
  int staleness = 1;            // S: ship when the adopted version is S versions behind (1: every version)
  // tau: ship earlier when a version changes by more (refresh_change); 0 = off. Unset (-1):
  // CoherenceRule::kDefaultTolerance when staleness > 1, else off (resolved when the config loads).
  double tolerance = -1;
  bool hierarchical = true;     // owner -> node leader -> leaders -> their node; false: owner to every replica
};

struct RuntimeConfig {
  // asteria (the default): refreshes on the shadow pipeline, off the critical path; native: roots /
  // bases inline at the step they are due, the reference implementations' schedule (the baseline that
  // benchmarks and step-for-step comparisons ask for explicitly).
  RuntimeMode mode = RuntimeMode::Asteria;
  // Where the model and the optimizer's update run: auto (cuda where a device is visible and the
  // build has the backend, else cpu; resolved when the config loads, said at startup), cpu, or
  // cuda (the CUDA backend: train/device_training.hpp).
  BackendKind backend = BackendKind::Auto;
  // The GEMMs' operands: auto (bf16 on cuda, fp32 on cpu), fp32, or bf16 (cuda only: the linear
  // layers' operands rounded to bf16, fp32 accumulation, everything stored in fp32). Resolved
  // when the config loads: never auto after.
  ComputePrecision precision = ComputePrecision::Auto;
  int threads = 0;              // 0 = all cores
  // Spread the blocks' refreshes over the F steps: auto (on in asteria mode, off in native, the
  // reference schedule), true or false. Resolved when the config loads: never auto after.
  Stagger stagger = Stagger::Auto;
  bool staggered() const { return stagger == Stagger::On; }
  ShadowConfig shadow;
  TiersConfig tiers;
  CoherenceConfig coherence;
  // The memory a process may hold (train/estimates/memory_estimate.hpp): auto = MemAvailable of
  // /proc/meminfo at startup (shared by the ranks of the machine), a byte size, or unlimited.
  // A run estimated above it is refused before it allocates anything.
  std::string memory_limit = "auto";
  bool memory_limit_auto() const { return memory_limit == "auto"; }
  // auto: the tier budgets, activation recompute, head chunk, shadow pipeline and micro-batch
  // chosen at startup to fit the memory limit (train/placement.hpp; explicit keys still
  // override); manual: as the config says.
  PlacementMode placement = PlacementMode::Auto;
  BlasKernels blas = BlasKernels::Auto;
  // Which library runs the CPU backend's GEMMs (core/cpu/gemm_routing.hpp).
  GemmChoice gemm = GemmChoice::Auto;
};

// A byte size as written in the config ("64MiB", "1.5GiB", "1000000", "unlimited" =
// UINT64_MAX); throws asteria::Error naming the text when it is not one.
uint64_t parse_byte_size(const std::string& text);

struct DistributedConfig {
  FsdpMode fsdp = FsdpMode::Full;  // full, hybrid (sharded in a node, replicated across), none (replicated)
  int world_size = 0;           // planning (--dry-run, --print-plan): plan for this many ranks;
                                // 0 = the launch's. A run refuses a value other than its ranks.
  int ranks_per_node = 0;       // 0 = from MPI
  int prefetch = 2;             // sharded: layers whose gather runs ahead of the forward
  // The replicas' parameters compared (train/replica_check.hpp) every this many steps and at the
  // end of training (0: at the end only). check_every_step: true is the older spelling of 1.
  int64_t check_every = 50;
  bool check_every_step = false;
  double timeout_s = 300;       // a collective not done by then ends the job, naming it
};

// Checkpoints (train/checkpoint/checkpoint_store.hpp, docs/DESIGN.md "Checkpoints").
struct CheckpointConfig {
  int64_t every = 0;            // steps between checkpoints; 0 = only at the end of training
  int keep = 3;                 // the newest K are kept ...
  int64_t keep_every = 0;       // ... and every one whose step is a multiple of this (0: none)
  std::string resume;           // "" = fresh start; "latest" (fresh when there is none); a path
  bool resume_latest() const { return resume == "latest"; }
  bool async = true;            // write on a thread while training goes on (the step is held
                                // only for the copy); falls back to writing in the step when
                                // the copy would not fit in memory
  bool enabled = true;          // false: no checkpoints at all (tests, benchmarks)
  std::vector<std::string> allow_changes;   // keys that may differ from the checkpoint's config
};

struct RunConfig {
  std::string dir = "runs/default";
  int64_t log_every = 0;        // progress lines when stdout is not a terminal; 0 = ~20 per run
  double peak_flops = 0;        // for MFU; 0 = from the CPU (train/estimates/flops.hpp)
  bool overwrite = false;       // a run.dir that already holds metrics is refused unless true
};

struct Config {
  uint64_t seed = 0;
  ModelConfig model;
  DataConfig data;
  OptimConfig optim;
  TrainConfig train;
  RuntimeConfig runtime;
  DistributedConfig distributed;
  CheckpointConfig checkpoint;
  RunConfig run;
  std::string source;           // the file it was loaded from
  // What loading adjusted, one line each, for the program to print (a warm-up clipped to a
  // short run's steps). Not part of the resolved config.
  std::vector<std::string> notes;
  // What runtime.backend auto chose and why, for the startup line ("" when the config names the
  // backend). Not part of the resolved config.
  std::string backend_choice;
  // The dotted keys the file and --set gave (runtime.placement auto never changes them). Not
  // part of the resolved config.
  std::set<std::string> given;
  // Whether `key` or a key under it (a section) was given.
  bool was_given(const std::string& key) const;
};

// `overrides` are "dotted.key=value" strings; value is parsed as YAML ("[0.9, 0.95]" is a list).
Config load_config(const std::string& path, const std::vector<std::string>& overrides = {});
// Same from YAML text (tests); `source_name` stands for the file name in messages.
Config load_config_text(const std::string& yaml, const std::string& source_name,
                        const std::vector<std::string>& overrides = {});
// A resolved config as config_to_yaml wrote it (a checkpoint's manifest): read as load_config_text
// reads, except that model.init_from's folder is not read again (its config.json's values are
// already the model's fields; the folder need not exist any more).
Config load_saved_config(const std::string& yaml, const std::string& source_name);
// The fully resolved config as YAML that load_config reads back to the same Config.
std::string config_to_yaml(const Config& cfg);

// Every key of the schema (dotted) with what a resume may do with it; `seed` is fixed.
const std::map<std::string, OnResume>& resume_policies();

// Resuming: every fixed key this config does not give (a default, a preset's, one placement would
// choose) takes the checkpoint's value, so the run continues as it was trained whatever the
// defaults are now, and counts as given (runtime.placement keeps it). Returns the keys whose value
// that changed, with both values, for the startup line.
std::vector<std::string> adopt_checkpoint_config(Config& cfg, const Config& saved);

// Refuses, with a clear message, any setting whose feature is not built yet.
void check_supported(const Config& cfg);

}  // namespace asteria
