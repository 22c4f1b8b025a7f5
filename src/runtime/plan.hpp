#pragma once
// The layer-execution plan of one step: an explicit, ordered list of operations over the
// model's layers, built before the step runs (docs/DESIGN.md "The plan").
//
// An Op names what it does (kind), where it runs (lane), the layer/block/micro-batch it touches,
// the states it reads and writes, and the ops it depends on. Ops are stored in an order that is
// a valid schedule of the compute lane: every dependency of an op appears before it.
// Subsystems add their ops through PlanContributor (plan_builder.hpp); the Executor
// (executor.hpp) runs a plan. Nothing is triggered by a hook firing at run time.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "optim/block_range.hpp"

namespace asteria {

enum class Lane : uint8_t { Compute, Comm, Staging, Host };

enum class OpKind : uint8_t {
  LoadBatch,     // data: next micro-batch into the model's input buffers
  Forward,       // model: layer forward
  Backward,      // model: layer backward (accumulates gradients)
  GradNorm,      // optimizer: squared norm of a layer's gradient
  ClipGrads,     // optimizer: global-norm clip factor from all GradNorm results
  OptimStep,     // optimizer: update a layer's parameters
  Snapshot,      // shadow (staging lane): copy the factors of the layer's refreshing blocks
  RootJob,       // shadow (host lane): compute one block's roots / basis from its snapshot
  RootJobBatch,  // shadow (compute lane, no host workers): the root jobs placed at this step
  PublishWait,   // shadow (compute lane): wait until the results due at this step are ready
  TierEvict,     // tiers (staging lane): write states back from the device tier to their home
  TierPrefetch,  // tiers (staging lane): bring a layer's states into the device tier
  TierWait,      // tiers (compute lane): wait for the prefetch of the layer about to step
  CheckpointCopy,  // checkpoint (staging lane, first): copy the state saved at the last step
  CheckpointWait,  // checkpoint (compute lane, before the optimizer): wait for that copy
  Gather,        // fsdp (comm lane): all-gather a layer's parameter shards before its forward
                 //   or backward, into a whole-layer buffer
  ReduceScatter, // fsdp (comm lane): the owners' shards of a layer's gradient, summed
  AllReduce,     // fsdp none (comm lane): a layer's whole gradient summed over the replicas
  Release,       // fsdp (compute lane): a gathered layer's buffer given back after its use
  CoherenceSync, // coherence (comm lane): the versions of a layer's blocks publishing now, from
                 //   their owners to the other replicas
  Recompute,     // model: a checkpointed block's forward again, right before its backward
  ParamLoad,     // parameters on the disk tier (staging lane): a layer's parameters read into a
                 //   buffer of whole layers before its use
  ParamRelease,  // parameters on the disk tier (compute lane): that buffer given back, unwritten
  ParamStore,    // parameters on the disk tier (staging lane): a layer's parameters written back
                 //   after its optimizer step, and its buffer given back
};
constexpr int kNumOpKinds = 24;

const char* to_string(Lane);
const char* to_string(OpKind);

// A piece of state an op touches: what it is and whose (layer index).
enum class StateKind : uint8_t { Params, Grads, Activations, OptimState, Batch, Snapshot };
const char* to_string(StateKind);

struct StateRef {
  StateKind kind;
  int layer;   // -1: not per layer (the batch)
  bool operator==(const StateRef&) const = default;
};

struct Op {
  int id = -1;                 // index in the plan
  OpKind kind{};
  Lane lane = Lane::Compute;
  int layer = -1;              // -1: whole model
  int block = -1;              // root_job: its preconditioner block; root_jobs: which of the step's
                               // placed parts (ShadowPlanOps); -1: whole layer
  BlockRange blocks;           // optim_step, tier_wait, snapshot: the part of the layer they touch
  int micro = -1;              // micro-batch, -1: not per micro-batch
  int64_t tag = -1;            // owner-defined (shadow: the step a root job publishes at; tiers:
                               // the index of the op's move list)
  std::vector<int> deps;       // ids of ops that must finish first
  std::vector<StateRef> reads;
  std::vector<StateRef> writes;
};

struct Plan {
  std::vector<Op> ops;
  int64_t step = 0;
  int micro_batches = 1;
  // Human-readable listing, one op per line; layer names are taken from `layer_names`;
  // `detail`, when given, adds an owner's description of an op (e.g. what a tier move moves).
  std::string describe(const std::vector<std::string>& layer_names,
                       const std::function<std::string(const Op&)>& detail = nullptr) const;
};

}  // namespace asteria
