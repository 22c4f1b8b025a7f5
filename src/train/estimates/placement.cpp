#include "train/estimates/placement.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <sstream>

#include "core/backend.hpp"
#include "core/error.hpp"
#include "core/memory_limits.hpp"
#include "model/model.hpp"
#include "optim/optimizer_factory.hpp"
#include "train/run_settings.hpp"
#include "train/tier_config.hpp"

namespace asteria {

std::string Placement::describe() const {
  std::ostringstream os;
  os << "placement (runtime.placement " << to_string(cfg.runtime.placement) << "): needs about " << human_bytes(need.total())
     << " of " << (limit == UINT64_MAX ? std::string("no limit") : human_bytes(static_cast<double>(limit)) + " (" + limit_source + ")");
  if (parts.empty()) os << "; as configured";
  for (const PlacementPart& p : parts)
    os << "\n  " << p.key << ": " << p.value << " -- " << p.reason << (p.changes_math ? " [changes the arithmetic]" : "");
  return os.str();
}

namespace {

// Budgets are written in whole MiB (a config a user can read back).
constexpr uint64_t kMiB = 1ull << 20;
std::string mib_text(uint64_t bytes) { return std::to_string(bytes / kMiB) + "MiB"; }

// The whole model's optimizer state (placement never changes it): its page-rounded bytes per
// lifecycle class, and what its layers in flight need in the device cache.
struct StateSizes {
  std::vector<std::vector<StateSpec>> specs;
  uint64_t hot = 0, rest = 0;
  int min_blocks_per_part = 1;
  explicit StateSizes(const Config& c)
      : specs(optimizer_state_specs(c.optim, model_param_tables(c.model))),
        min_blocks_per_part(tier_options(c).min_blocks_per_part) {
    for (const auto& layer : specs)
      for (const StateSpec& spec : layer) (spec.cls == StateClass::Hot ? hot : rest) += page_round(spec.bytes());
  }
  // The least the tiers reach: the layers moved in the smallest parts (tier_layout.hpp).
  uint64_t cache_need(int distance) const { return tier_cache_need(specs, distance, min_blocks_per_part); }
};

class Chooser {
 public:
  Chooser(const Config& cfg, const PlacementInputs& in)
      : in_(in), target_(kPlacementFill * static_cast<double>(in.limit)), sizes_(cfg) {}

  // Whether `c` fits the target (and its disk tier the free disk); its estimate into `need`.
  bool fits(const Config& c, MemoryEstimate* need = nullptr, TierCheck check = TierCheck::Quick) const {
    MemoryEstimate e;
    try {
      e = in_.estimate(c, check);
    } catch (const Error&) {
      return false;   // budgets that cannot hold the layers in flight
    }
    if (need) *need = e;
    return fits_need(e) && fits_device(c, check);
  }
  bool fits_need(const MemoryEstimate& e) const {
    if (in_.disk_free && e.optimizer_on_disk + e.jobs_on_disk + e.params_on_disk > 0.95 * static_cast<double>(*in_.disk_free))
      return false;
    return e.total() <= target_;
  }
  // On CUDA: what `c` holds on the GPU within the same share of its free memory.
  bool fits_device(const Config& c, TierCheck check) const { return device_need(c, check) <= device_target(); }
  double device_need(const Config& c, TierCheck check) const {
    if (!in_.device_free) return 0;
    try {
      return in_.device_estimate(c, check).total();
    } catch (const Error&) {
      return HUGE_VAL;
    }
  }
  // On CUDA, what the GPU holds of its free memory, for the reasons.
  std::string gpu_text(const Config& c) const {
    if (!in_.device_free) return "";
    return "; the GPU holds " + human_bytes(device_need(c, TierCheck::Planned)) + " of its " +
           human_bytes(static_cast<double>(*in_.device_free)) + " free (the device tier, params, grads, activations)";
  }
  double device_target() const {
    return in_.device_free ? kPlacementFill * static_cast<double>(*in_.device_free) : HUGE_VAL;
  }

  // The tier budgets and prefetch distance for `c`, the most state in memory that fits (hot
  // state on the device tier first, then the rest on the host tier); false when even the least
  // (everything on disk but the cache of the layers in flight) does not fit. `least` gets the
  // smallest need seen.
  bool fit_tiers(Config& c, std::vector<PlacementPart>& parts, double& least) const {
    MemoryEstimate e;
    if (budgets_given(c)) {   // the config's budgets; an error in them is the config's
      least = in_.estimate(c, TierCheck::Quick).total();
      return fits(c);
    }
    Config all = c;
    all.runtime.tiers.device.bytes = all.runtime.tiers.host.bytes = "unlimited";
    if (fits(all, &e)) {
      c = all;
      least = e.total();
      return true;
    }
    const double all_in_memory = least = e.total();
    const int configured = c.runtime.tiers.prefetch_distance;
    for (int d = configured; d >= lowest_distance(c); --d) {
      Config x = c;
      x.runtime.tiers.prefetch_distance = d;
      x.runtime.tiers.host.bytes = "0";
      const uint64_t cache = round_up(sizes_.cache_need(d));
      const uint64_t device = largest_fitting(x, x.runtime.tiers.device.bytes, cache, round_up(cache + sizes_.hot) + 64 * kMiB, &e);
      least = std::min(least, e.total());
      if (device == 0) continue;
      if (!plan_at_most(x, device, cache, e)) continue;
      c = x;
      parts.push_back({"runtime.tiers", tiers_text(c, e),
                       "all optimizer state in memory needs " + human_bytes(all_in_memory) + "; the hot state (moments, "
                       "factors) stays in memory first, then the rest, beside the cache of the " + std::to_string(d + 1) +
                       " layers (or parts of layers) in flight" + gpu_text(x)});
      return true;
    }
    return false;
  }

  // The budgets of `x` with a device budget of at most `device` (and at least the cache): the
  // largest host budget beside it, confirmed by planning. Where the planned layout's cache
  // fragments past the room the bisection left, a smaller device budget is tried, an eighth at a
  // time: so that a larger limit never fails where a smaller one fitted at this distance.
  bool plan_at_most(Config& x, uint64_t device, uint64_t cache, MemoryEstimate& e) const {
    for (int i = 0; i < 8; ++i, device = std::max(cache, round_up(device / 8 * 7))) {
      Config y = x;
      y.runtime.tiers.device.bytes = mib_text(device);
      // On CUDA the hot state the GPU cannot hold is better in pinned host memory than on disk.
      const uint64_t host = largest_fitting(y, y.runtime.tiers.host.bytes, 0,
                                            round_up(sizes_.rest + (in_.device_free ? sizes_.hot : 0)));
      y.runtime.tiers.host.bytes = mib_text(host);
      if (plans(y, e)) {
        x = y;
        return true;
      }
      if (device == cache) break;
    }
    return false;
  }

  // The least memory the tiers alone reach: every optimizer state on the disk tier but the
  // cache of the fewest layers in flight (raised while its fragmentation needs more room);
  // what a running process does when nothing fits. False when the config's own budgets rule.
  bool least_tiers(Config& c, std::vector<PlacementPart>& parts) const {
    if (budgets_given(c)) return false;
    const int d = lowest_distance(c);
    c.runtime.tiers.prefetch_distance = d;
    c.runtime.tiers.host.bytes = mib_text(0);
    uint64_t device = round_up(sizes_.cache_need(d));
    for (int i = 0; i < 16; ++i) {
      c.runtime.tiers.device.bytes = mib_text(device);
      try {
        const MemoryEstimate e = in_.estimate(c, TierCheck::Planned);
        parts.push_back({"runtime.tiers", tiers_text(c, e),
                         "the least the tiers reach: all optimizer state on disk but the cache of the " +
                             std::to_string(d + 1) + " layers (or parts of layers) in flight; the run needs " + human_bytes(e.total()) +
                             " and may go over its limit"});
        return true;
      } catch (const Error&) {   // the cache's fragmentation needs more room
        device = round_up(device / 8 * 9);
      }
    }
    return false;
  }

  // The quick choice of `x` confirmed with its planned layout, as the run will have it (one
  // planning, the costly part, in the common case). The device cache's fragmentation may need
  // more room than the layers in flight: then the device budget is raised by an eighth at a time
  // while it still fits.
  bool plans(Config& x, MemoryEstimate& need) const {
    for (int i = 0; i < 4; ++i) {
      try {
        need = in_.estimate(x, TierCheck::Planned);
        return fits_need(need) && fits_device(x, TierCheck::Planned);
      } catch (const Error&) {   // the cache's fragmentation needs more room
      }
      x.runtime.tiers.device.bytes = mib_text(round_up(parse_byte_size(x.runtime.tiers.device.bytes) / 8 * 9));
      if (!fits(x, &need)) return false;
    }
    return false;
  }

 private:
  static uint64_t round_up(uint64_t b) { return (b + kMiB - 1) / kMiB * kMiB; }


  bool fits_at(Config& x, std::string& key, uint64_t bytes, MemoryEstimate* e = nullptr) const {
    key = mib_text(bytes);
    return fits(x, e);
  }

  // The largest budget in [lo, hi] (whole MiB) at which `key` of `x` fits; 0 when lo does not
  // (with lo 0: 0 either way), and then the need at lo into `at_lo`. The need grows with the
  // budget, so a bisection finds it.
  uint64_t largest_fitting(Config& x, std::string& key, uint64_t lo, uint64_t hi, MemoryEstimate* at_lo = nullptr) const {
    if (!fits_at(x, key, lo, at_lo)) return 0;
    if (fits_at(x, key, hi)) return hi;
    // fits at lo, not at hi; to the MiB.
    while (hi - lo > kMiB) {
      const uint64_t mid = (lo + hi) / 2 / kMiB * kMiB;
      (fits_at(x, key, mid) ? lo : hi) = mid;
    }
    return lo;
  }

  static bool budgets_given(const Config& c) {
    return c.was_given("runtime.tiers.device.bytes") || c.was_given("runtime.tiers.host.bytes");
  }
  // Down to 0 unless given: each unit then loads right before its step, which waits for it (the
  // tier stall), but only one unit's state is in the cache; the arithmetic is the same.
  static int lowest_distance(const Config& c) {
    return c.was_given("runtime.tiers.prefetch_distance") ? c.runtime.tiers.prefetch_distance : 0;
  }
  static std::string tiers_text(const Config& c, const MemoryEstimate& e) {
    std::ostringstream v;
    v << "device " << c.runtime.tiers.device.bytes << ", host " << c.runtime.tiers.host.bytes << ", disk "
      << human_bytes(e.optimizer_on_disk) << " (" << disk_tier_dir(c) << "); prefetch_distance "
      << c.runtime.tiers.prefetch_distance;
    return v.str();
  }

  static std::string disk_tier_dir(const Config& c) {
    return std::filesystem::path(disk_tier_file(c)).parent_path().string();
  }

  const PlacementInputs& in_;
  double target_;
  StateSizes sizes_;
};

// A change to try, cheapest first: applies itself to `c` and says what it did, or returns false
// when it does not apply (its keys given, or nothing left to lower).
struct Move {
  std::function<bool(Config& c, PlacementPart& part)> apply;
};

// Whether the run has shadow refreshes in flight after its synchronous warm-up.
bool refreshes_in_flight(const Config& c) {
  const int64_t sync = c.runtime.shadow.sync_steps >= 0 ? c.runtime.shadow.sync_steps : c.train.warmup_steps;
  return c.runtime.mode == RuntimeMode::Asteria && describe(c.optim.name).refreshes && sync < c.train.steps;
}

// The shadow pipeline's refreshes in flight parked on the disk tier, all but the jobs in use at
// once: the same bits, each refresh's buffers written and read back while it waits. False where
// no refresh is ever in flight, the key is given, or they are parked already.
bool park_jobs(Config& c, PlacementPart& p) {
  if (!refreshes_in_flight(c) || c.was_given("runtime.shadow.resident_jobs")) return false;
  const int least = least_resident_jobs(c);
  if (c.runtime.shadow.resident_jobs == least) return false;
  c.runtime.shadow.resident_jobs = least;
  p = {"runtime.shadow.resident_jobs", std::to_string(least),
       "the refreshes in flight (each holds its fp64 factors and bases) wait on the disk tier, all but the " +
           std::to_string(least) + " in use at once"};
  return true;
}

// The blocks' parameters on the disk tier: the same bits, the most I/O of any step (each block
// read before every forward and backward and the optimizer step, written after the step). False
// where the key is given, or the launch cannot have it (CUDA, several ranks: tier_config.hpp).
bool params_to_disk(Config& c, PlacementPart& p, int world) {
  if (c.was_given("runtime.tiers.params.home") || c.runtime.tiers.params.home == ParamsHome::Disk) return false;
  if (c.runtime.backend == BackendKind::Cuda || world > 1) return false;
  c.runtime.tiers.params.home = ParamsHome::Disk;
  const ParamOffloadBytes b = params_bytes(c);
  p = {"runtime.tiers.params.home", "disk",
       "the blocks' fp32 parameters (" + human_bytes(static_cast<double>(b.on_disk)) + ") live on the disk tier, each " +
           "read into one of " + std::to_string(params_buffers(c)) + " whole-layer buffers before its forward, backward " +
           "and optimizer step and written back after the step: the same bits, their bytes read 2 x micro-batches + 1 " +
           "and written once per step"};
  return true;
}

std::vector<Move> moves(int world) {
  std::vector<Move> m;
  auto recompute_free = [](const Config& c) {
    return !c.was_given("train.activation_recompute") && !c.was_given("train.recompute_every_k");
  };
  m.push_back({[=](Config& c, PlacementPart& p) {
                 if (!recompute_free(c) || c.train.activation_recompute != ActivationRecompute::Mode::None) return false;
                 c.train.activation_recompute = ActivationRecompute::Mode::EveryK;
                 c.train.recompute_every_k = 2;
                 p = {"train.activation_recompute", "every_k (recompute_every_k 2)",
                      "every other block keeps only its input and runs its forward again for its backward"};
                 return true;
               }});
  m.push_back({[=](Config& c, PlacementPart& p) {
                 if (!recompute_free(c) || c.train.activation_recompute == ActivationRecompute::Mode::Blocks) return false;
                 c.train.activation_recompute = ActivationRecompute::Mode::Blocks;
                 p = {"train.activation_recompute", "blocks", "every block runs its forward again for its backward"};
                 return true;
               }});
  m.push_back({[](Config& c, PlacementPart& p) {
                 if (c.was_given("model.head_chunk") || c.model.head_chunk == 256) return false;
                 c.model.head_chunk = 256;
                 // The head's weight gradient is then summed chunk by chunk: other rounding, once
                 // the micro-batch has more rows than a chunk.
                 p = {"model.head_chunk", "256", "the LM head's logits 256 rows at a time, not the whole micro-batch's",
                      256 < c.train.micro_batch * c.model.seq_len};
                 return true;
               }});
  auto shadow_in_flight = [](const Config& c) {
    return refreshes_in_flight(c) && !c.was_given("runtime.shadow.delay") && !c.was_given("runtime.shadow.sync_steps");
  };
  // The refreshes in flight parked on the disk tier, all but the jobs in use at once (one per
  // compute thread or worker, and a snapshot's): the same bits, each refresh's buffers written
  // and read back while it waits.
  m.push_back({park_jobs});
  // Lowering the delay holds fewer refreshes in memory only where they are not parked.
  m.push_back({[=](Config& c, PlacementPart& p) {
                 if (!shadow_in_flight(c) || c.runtime.shadow.delay <= 2 || c.runtime.shadow.resident_jobs > 0) return false;
                 c.runtime.shadow.delay = 2;
                 p = {"runtime.shadow.delay", "2", "fewer refreshes in flight (each holds its fp64 factors and bases)", true};
                 return true;
               }});
  m.push_back({[=](Config& c, PlacementPart& p) {
                 if (!shadow_in_flight(c)) return false;
                 c.runtime.shadow.sync_steps = c.train.steps;
                 p = {"runtime.shadow.sync_steps", std::to_string(c.train.steps),
                      "every refresh runs at its step (staggered), none in flight: the shadow pipeline's state does not fit", true};
                 return true;
               }});
  m.push_back({[](Config& c, PlacementPart& p) {
                 const int mb = c.train.micro_batch;
                 if (mb <= 1) return false;
                 const int next = mb % 2 == 0 ? mb / 2 : 1;
                 c.train.grad_accum *= mb / next;
                 c.train.micro_batch = next;
                 p = {"train.micro_batch", std::to_string(next) + " x grad_accum " + std::to_string(c.train.grad_accum),
                      "a smaller micro-batch, more of them: the global batch is unchanged, the sums' order is not", true};
                 return true;
               }});
  m.push_back({[world](Config& c, PlacementPart& p) { return params_to_disk(c, p, world); }});
  return m;
}

}  // namespace

int least_resident_jobs(const Config& c) {
  return (shadow_lane(c) == ShadowLane::Compute ? compute_threads(c) : c.runtime.shadow.threads) + 1;
}

Placement choose_placement(const Config& cfg, const PlacementInputs& in) {
  Placement p;
  p.cfg = cfg;
  p.limit = in.limit;
  p.limit_source = in.limit_source;
  if (cfg.runtime.placement == PlacementMode::Manual || in.limit == UINT64_MAX) {
    p.need = in.estimate(cfg, TierCheck::Planned);
    return p;
  }
  const Chooser chooser(cfg, in);
  Config c = cfg;
  std::vector<PlacementPart> tier_part, taken;
  double least = 0;
  bool ok = chooser.fits(c, &p.need);   // as configured
  if (!ok) ok = chooser.fit_tiers(c, tier_part, least);
  for (const Move& m : moves(in.world)) {
    if (ok) break;
    PlacementPart part;
    // A move that does not apply is skipped; the micro-batch's halvings repeat.
    while (!ok && m.apply(c, part)) {
      part.reason += " (" + human_bytes(least) + " needed before it)";
      taken.push_back(part);
      p.changes_math = p.changes_math || part.changes_math;
      tier_part.clear();
      ok = chooser.fit_tiers(c, tier_part, least);
      if (part.key != "train.micro_batch") break;
    }
  }
  // What the run will have (the config's own budgets included: an error in them is the config's).
  if (ok) {
    p.need = in.estimate(c, TierCheck::Planned);
    ok = chooser.fits_need(p.need) && chooser.fits_device(c, TierCheck::Planned);
  }
  if (!ok && !chooser.fits_device(c, TierCheck::Quick))
    fail(cfg.source, ": this run needs about ", human_bytes(chooser.device_need(c, TierCheck::Quick)),
         " of GPU memory even with the least optimizer state on the device",
         taken.empty() ? std::string() : " and " + std::to_string(taken.size()) + " more step(s) of runtime.placement auto",
         " (params, grads and activations live there), but the device has ", human_bytes(static_cast<double>(*in.device_free)),
         " free (cudaMemGetInfo; placement fills ", static_cast<int>(kPlacementFill * 100),
         "% of it). Shard it over more GPUs, or use a GPU with more memory; `--dry-run` shows the estimate");
  if (!ok)
    fail(cfg.source, ": this run needs about ", human_bytes(least), " of memory per process even with all optimizer state "
         "on the disk tier",
         taken.empty() ? std::string() : " and " + std::to_string(taken.size()) + " more step(s) of runtime.placement auto (the last: " + taken.back().key + " " + taken.back().value + ")",
         ", but may use ", human_bytes(static_cast<double>(in.limit)), " (", in.limit_source, "; placement fills ",
         static_cast<int>(kPlacementFill * 100), "% of it). Shard it over more ranks (distributed.fsdp full), or give it more "
         "memory; `--dry-run` shows the estimate");
  p.parts = tier_part;
  p.parts.insert(p.parts.end(), taken.begin(), taken.end());
  p.cfg = c;
  return p;
}

Placement replace_tiers(const Placement& running, const TiersConfig& given, const PlacementInputs& in) {
  Placement p = running;
  p.limit = in.limit;
  p.limit_source = in.limit_source;
  p.fits = true;
  Config c = running.cfg;
  c.runtime.tiers = given;
  c.runtime.tiers.params = running.cfg.runtime.tiers.params;   // where the run keeps them, for good
  const Chooser chooser(c, in);
  std::vector<PlacementPart> tier_part;
  double least = 0;
  PlacementPart parked;
  if (!chooser.fits(c) && !chooser.fit_tiers(c, tier_part, least)) {
    // The refreshes in flight parked too, where the running placement keeps them in memory (and
    // kept parked when even that is not enough).
    tier_part.clear();
    if (!park_jobs(c, parked) || (!chooser.fits(c) && !chooser.fit_tiers(c, tier_part, least))) {
      tier_part.clear();
      if (!chooser.least_tiers(c, tier_part)) c.runtime.tiers = running.cfg.runtime.tiers;   // the config's own
      p.fits = false;
    }
  }
  // The parts: the new tiers' first, then the rest of the running placement's (and the jobs parked now).
  p.parts = tier_part;
  for (const PlacementPart& part : running.parts)
    if (part.key != "runtime.tiers") p.parts.push_back(part);
  if (!parked.key.empty()) p.parts.push_back(parked);
  p.cfg = c;
  p.need = in.estimate(c, TierCheck::Planned);
  return p;
}

PlacementInputs placement_inputs(const Config& cfg, int world, int ranks_per_node, uint64_t limit, std::string limit_source) {
  PlacementInputs in;
  in.limit = limit;
  in.limit_source = std::move(limit_source);
  in.world = world;
  // On the GPU every rank is a process of its own on the host (a sharded rank's with its shards).
  in.estimate = [world, ranks_per_node](const Config& c, TierCheck check) {
    if (c.runtime.backend == BackendKind::Cuda) return process_memory(planned_launch(c, world, ranks_per_node), check);
    return world == 1 ? process_memory(c, check) : rank_memory(c, world, ranks_per_node, check);
  };
  in.disk_free = free_disk_bytes(std::filesystem::path(disk_tier_file(cfg)).parent_path().string());
  // Each rank sees its own GPU as device 0 (train/rank_device.hpp).
  if (DeviceMemory dev; cfg.runtime.backend == BackendKind::Cuda && cuda_device_memory(0, &dev)) {
    in.device_free = dev.free;
    in.device_estimate = [world, ranks_per_node](const Config& c, TierCheck check) {
      return device_memory(planned_launch(c, world, ranks_per_node), check);
    };
  }
  return in;
}

Placement place_for_planning(const Config& cfg) {
  const int world = std::max(1, cfg.distributed.world_size);
  const int per_node = cfg.distributed.ranks_per_node > 0 ? cfg.distributed.ranks_per_node : world;
  if (cfg.distributed.world_size > 0 && cfg.runtime.memory_limit_auto()) {
    // A launch planned for other machines: their memory is not this one's.
    Placement p;
    p.cfg = cfg;
    p.limit_source = "planning distributed.world_size " + std::to_string(world) +
                     ": the launch's machines are not this one; give runtime.memory_limit to place for them";
    p.need = rank_memory(cfg, world, per_node);
    return p;
  }
  return place_run(cfg, world, per_node);
}

nlohmann::json placement_json(const Placement& p) {
  nlohmann::json parts = nlohmann::json::array();
  for (const PlacementPart& part : p.parts)
    parts.push_back({{"key", part.key}, {"value", part.value}, {"reason", part.reason}, {"changes_math", part.changes_math}});
  return {{"mode", to_string(p.cfg.runtime.placement)},
          {"limit_bytes", p.limit == UINT64_MAX ? nlohmann::json(nullptr) : nlohmann::json(p.limit)},
          {"limit_source", p.limit_source},
          {"need_bytes", p.need.total()},
          {"changes_math", p.changes_math},
          {"parts", parts}};
}

Placement place_run(const Config& cfg, int world, int ranks_per_node, std::optional<uint64_t> limit_override) {
  return choose_placement(
      cfg, placement_inputs(cfg, world, ranks_per_node,
                            limit_override ? *limit_override : memory_limit_bytes(cfg, ranks_per_node),
                            memory_limit_source(cfg, ranks_per_node) + (limit_override ? ", the smallest over the ranks' machines" : "")));
}

}  // namespace asteria
