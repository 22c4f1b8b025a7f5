#pragma once
// distributed.fsdp (docs/DESIGN.md "FSDP"): which ranks share a layer's optimizer work, and the
// collectives that keep parameters and gradients consistent across them.
//   full    one shard group of all ranks; no replicas;
//   hybrid  a shard group per node (the intra-node ranks), replicated across nodes (the ranks
//           with the same local rank form a replica group);
//   none    no sharding (every rank a group of one), replicated over all ranks.
// Each layer is cut by shard_model() over its shard group: rank g of the group owns the units
// of one range of the flat buffer [offset, offset + count), steps exactly those parameters with its own
// optimizer state (built on shard_table()), and receives their gradient.
//
// Sharded (ZeRO-3): a rank keeps only its shard of every layer's parameters (the master
// weights its optimizer steps) and of their gradient (summed over the step's micro-batches);
// the whole layers exist only in a few buffers in flight (layer_slots.hpp). Per micro-batch,
// on the comm lane (sharding_plan_ops.hpp has the schedule):
//   gather(l)          every rank's shard into a whole-layer buffer (all-gather in the shard
//                      group, in place, each part its owner's exact size: no padding travels),
//                      before layer l's forward and again before its backward;
//   reduce_scatter(l)  right after layer l's backward: the group's sum of this rank's part of
//                      the micro-batch's whole-layer gradient, added to its gradient shard;
//   reduce_over_replicas(l)  after the last micro-batch's: the shard summed over the replica
//                      group (all-reduce) and scaled to the mean over all ranks.
// Unsharded (fsdp none, or a group of one) every rank keeps whole layers, and the replicas'
// all-reduce of the whole gradient is the only collective.
// The gradient's squared norm is the sum over the shard group of each owner's part.
//
// Threads: gather, reduce_scatter and reduce_over_replicas run on the comm lane (or, between
// steps, on the compute lane while the comm lane is idle) over duplicates of the shard and
// replica groups that only they use; group(), replicas() and sum_over_group are the compute
// lane's (communicator.hpp "Threads").
#include <memory>
#include <string>
#include <vector>

#include "core/buffer.hpp"
#include "core/step_metrics.hpp"
#include "runtime/executor.hpp"
#include "comm/communicator.hpp"
#include "fsdp/shard_layout.hpp"
#include "comm/topology.hpp"
#include "fsdp/fsdp_mode.hpp"
#include "model/param_table.hpp"

namespace asteria {

// The owned part of a layer as a table of its own (offsets from the shard's start): one entry
// per owned unit, a row-block of a matrix (its rows, all columns, row_offset = its first row
// in the whole tensor) or a whole 1-D tensor. Every row-block is at most max_dim rows, so the
// optimizer cuts it into the same preconditioner blocks as the whole tensor.
ParamTable shard_table(const ParamTable& table, const LayerShards& shards, int group_rank, int64_t max_dim);

// The data a rank moves per collective, at least: in the shard group, the other ranks' parts of
// a layer (what must arrive for an all-gather, leave for a reduce-scatter); across replicas,
// 2 (n - 1)/n of its shard (a ring all-reduce). The algorithm MPI picks may move more.
struct CommBytes {
  size_t group = 0;      // in the shard group (hybrid: inside the node)
  size_t replicas = 0;   // in the replica group (hybrid: across nodes)
};

class Sharding {
 public:
  // tables: the whole layers.
  Sharding(FsdpMode mode, Topology& topo, const std::vector<ParamTable>& tables, int64_t max_dim);

  FsdpMode mode() const { return mode_; }
  bool sharded() const { return group_->size() > 1; }       // gathers and reduce-scatters
  bool reduces() const { return world_ > 1; }               // any gradient collective at all
  int group_rank() const { return group_->rank(); }
  int group_size() const { return group_->size(); }
  Communicator& group() { return *group_; }
  // The replica group: the ranks holding the same shard (null: no replicas).
  Communicator* replicas() { return replicas_; }
  // The ranks that write checkpoints: one replica's (a shard group's every rank; with fsdp
  // none, rank 0).
  bool writes_checkpoints() const { return !replicas_ || replicas_->rank() == 0; }
  const LayerShards& shards(int layer) const { return shards_[layer]; }
  size_t offset(int layer) const { return shards_[layer].offset(group_rank()); }
  size_t count(int layer) const { return shards_[layer].count(group_rank()); }
  // This rank's tables (all of each layer with fsdp none).
  const std::vector<ParamTable>& owned_tables() const { return owned_; }
  // Sharded: this rank's part of layer l's parameters and of its gradient (count(layer) floats
  // each; the optimizer steps the one with the other).
  float* shard_params(int layer) { return shard_params_.data() + shard_at_[layer]; }
  float* shard_grads(int layer) { return shard_grads_.data() + shard_at_[layer]; }
  void zero_shard_grads(int layer);
  // The largest layer (the size of a whole-layer buffer).
  size_t largest_layer() const { return largest_layer_; }
  // Every rank of the shard group's part of layer l: its size and where it starts in the whole
  // layer (MPI's ints), in group-rank order; the collectives' counts and offsets.
  const std::vector<int>& part_counts(int layer) const { return counts_[layer]; }
  const std::vector<int>& part_offsets(int layer) const { return offsets_[layer]; }
  int world_size() const { return world_; }
  // Collectives of this layout run elsewhere (the device's: fsdp/device_shards.hpp) count their
  // bytes here, so that the step's metrics have them whichever memory they moved.
  void add_bytes(const CommBytes& b) {
    bytes_.group += b.group;
    bytes_.replicas += b.replicas;
  }

  // Sharded: whole = layer l's whole parameters, from every rank's shard_params(l).
  void gather(int layer, float* whole, const std::string& label);
  // Sharded: adds the shard group's sum of this rank's part of `whole` (a micro-batch's
  // whole-layer gradient) to shard_grads(l). `whole` is scrambled (rotated) on return.
  void reduce_scatter(int layer, float* whole, const std::string& label);
  // part: this rank's count(layer) floats of the gradient (shard_grads(l) sharded, the whole
  // gradient otherwise); summed over the replica group and scaled to the mean over all ranks.
  void reduce_over_replicas(int layer, float* part, const std::string& label);
  // Sharded: the same for this rank's gradient shard (after the last micro-batch's reduce-scatter).
  void reduce_shard_over_replicas(int layer, const std::string& label) {
    reduce_over_replicas(layer, shard_grads(layer), label);
  }
  // The CUDA backend (fsdp none): reduce_over_replicas's `part` is then device memory, summed
  // over `comm` (the NCCL communicator of the same replicas) and scaled on the device. replicas()
  // stays the host's communicator (coherence ships refresh results in host memory over it).
  void use_device_replicas(Communicator& comm);
  // The sum over the shard group (each rank adds its owned part's value), in place.
  void sum_over_group(double* data, size_t count, const std::string& label);
  // Bytes this rank sent in collectives since the last call.
  CommBytes take_bytes();
  // The step's gradient and parameter collectives (sharding_metrics.cpp), when there are any:
  // each rank's comm lane time, its compute lane's wait for them, the bytes it moved. Takes the
  // byte counts every step (take_bytes), recorded or not.
  void record_metrics(StepMetrics& metrics, const Executor& executor);

 private:
  FsdpMode mode_;
  int world_;
  Communicator* group_;                 // the shard group (a group of one: a local communicator)
  Communicator* replicas_;              // the replica group (null: none)
  Communicator* device_replicas_ = nullptr;   // the same ranks over device memory (CUDA backend)
  std::unique_ptr<Communicator> local_;
  std::unique_ptr<Communicator> lane_group_, lane_replicas_;   // the comm lane's duplicates
  std::vector<LayerShards> shards_;
  std::vector<ParamTable> owned_;
  std::vector<std::vector<int>> counts_, offsets_;   // per layer, per rank of the group (MPI's ints)
  std::vector<float> recv_;             // this rank's largest part of a gradient, allocated once
  Buffer<float> shard_params_, shard_grads_;   // sharded: this rank's parts of all layers
  std::vector<size_t> shard_at_;        // layer l's part starts at shard_at_[l]
  size_t largest_layer_ = 0;
  CommBytes bytes_;
};

}  // namespace asteria
