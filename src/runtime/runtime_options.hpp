#pragma once
// The runtime's closed options, read and written by the config (config/config_schema.hpp) under
// the names to_string gives.
namespace asteria {

// runtime.mode. Native: the roots / bases refreshed inline (the baseline); Asteria: the shadow
// pipeline (runtime/shadow.hpp).
enum class RuntimeMode { Native, Asteria };

// runtime.shadow.lane: where the shadow pipeline's root jobs run (config/config.hpp ShadowConfig).
// Auto is resolved by the trainer (workers when they have cores of their own, else compute).
enum class ShadowLane { Auto, Workers, Compute, Device };

// runtime.stagger: spread the blocks' refreshes over the F steps. Auto is resolved when the
// config loads (On in asteria mode, Off in native): never Auto after.
enum class Stagger { Auto, On, Off };

// runtime.placement: auto (train/placement.hpp) or manual (the config's keys as they are).
enum class PlacementMode { Auto, Manual };

inline const char* to_string(PlacementMode p) { return p == PlacementMode::Auto ? "auto" : "manual"; }

// runtime.tiers.params.home: where the blocks' fp32 parameters live between their uses: memory
// (the model's own buffers), or disk (the disk tier, a layer in memory only while in flight:
// fsdp/param_offload.hpp). The same bits either way.
enum class ParamsHome { Memory, Disk };

inline const char* to_string(ParamsHome h) { return h == ParamsHome::Memory ? "memory" : "disk"; }

inline const char* to_string(RuntimeMode m) { return m == RuntimeMode::Asteria ? "asteria" : "native"; }

inline const char* to_string(ShadowLane l) {
  switch (l) {
    case ShadowLane::Auto: return "auto";
    case ShadowLane::Workers: return "workers";
    case ShadowLane::Compute: return "compute";
    case ShadowLane::Device: return "device";
  }
  return "?";
}

// The config's spelling: true / false.
inline const char* to_string(Stagger s) {
  switch (s) {
    case Stagger::Auto: return "auto";
    case Stagger::On: return "true";
    case Stagger::Off: return "false";
  }
  return "?";
}

}  // namespace asteria
