#pragma once
// distributed.fsdp: how the ranks share the model and its optimizer state (fsdp/sharding.hpp).
namespace asteria {

// Full: one shard group of every rank, no replicas; Hybrid: sharded inside a node, replicated
// across nodes; None: every rank holds everything (replicated).
enum class FsdpMode { Full, Hybrid, None };

inline const char* to_string(FsdpMode m) {
  switch (m) {
    case FsdpMode::Full: return "full";
    case FsdpMode::Hybrid: return "hybrid";
    case FsdpMode::None: return "none";
  }
  return "?";
}

}  // namespace asteria
