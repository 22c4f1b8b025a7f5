#pragma once
// distributed.fsdp (DESIGN.md "FSDP"): which ranks share a layer's optimizer work, and the
// collectives that keep parameters and gradients consistent across them.
//   full    one shard group of all ranks; no replicas;
//   hybrid  a shard group per node (the intra-node ranks), replicated across nodes (the ranks
//           with the same local rank form a replica group);
//   none    no sharding (every rank a group of one), replicated over all ranks.
// Each layer is cut by shard_layer() over its shard group: rank g of the group owns the units
// [begin[g], begin[g+1]) of the flat buffer, steps exactly those parameters with its own
// optimizer state (built on shard_table()), and receives their gradient.
//
// Per step, on the comm lane:
//   gather(l)        before layer l's first forward: every rank's updated shard into the whole
//                    flat parameter buffer (all-gather in the shard group, in place, each part
//                    its owner's exact size: no padding travels);
//   reduce_grads(l)  after layer l's last backward: the owner's shard of the gradient summed
//                    over the shard group (reduce-scatter), then over the replica group
//                    (all-reduce), scaled to the mean over all ranks; with fsdp none this is
//                    the all-reduce of the whole gradient.
// The gradient's squared norm is the sum over the shard group of each owner's part.
//
// Every rank keeps the whole flat parameter and gradient buffer of every layer for now (the
// optimizer state, the largest part with the second-order optimizers, is sharded); gathering
// into a few layer buffers in flight, released after use, comes next.
#include <memory>
#include <string>
#include <vector>

#include "fsdp/communicator.hpp"
#include "fsdp/shard_layout.hpp"
#include "fsdp/topology.hpp"
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
  // mode: full | hybrid | none. tables: the whole layers.
  Sharding(const std::string& mode, Topology& topo, const std::vector<ParamTable>& tables, int64_t max_dim);

  const std::string& mode() const { return mode_; }
  bool sharded() const { return group_->size() > 1; }       // gathers and reduce-scatters
  bool reduces() const { return world_ > 1; }               // any gradient collective at all
  int group_rank() const { return group_->rank(); }
  int group_size() const { return group_->size(); }
  Communicator& group() { return *group_; }
  // The ranks that write checkpoints: one replica's (a shard group's every rank; with fsdp
  // none, rank 0).
  bool writes_checkpoints() const { return !replicas_ || replicas_->rank() == 0; }
  const LayerShards& shards(int layer) const { return shards_[layer]; }
  size_t offset(int layer) const { return shards_[layer].offset(group_rank()); }
  size_t count(int layer) const { return shards_[layer].count(group_rank()); }
  // This rank's tables (all of each layer with fsdp none).
  const std::vector<ParamTable>& owned_tables() const { return owned_; }

  // params: layer l's whole flat buffer; this rank's shard is current, the rest is filled in.
  void gather(int layer, float* params, const std::string& label);
  // grads: layer l's whole flat gradient (this rank's sum over its micro-batches); afterwards
  // this rank's shard holds the mean over all ranks (the rest of the buffer is left as it was).
  void reduce_grads(int layer, float* grads, const std::string& label);
  // The sum over the shard group (each rank adds its owned part's value), in place.
  void sum_over_group(double* data, size_t count, const std::string& label);
  // Bytes this rank sent in collectives since the last call.
  CommBytes take_bytes();

 private:
  std::string mode_;
  int world_;
  Communicator* group_;                 // the shard group (a group of one: a local communicator)
  Communicator* replicas_;              // the replica group (null: none)
  std::unique_ptr<Communicator> local_;
  std::vector<LayerShards> shards_;
  std::vector<ParamTable> owned_;
  std::vector<std::vector<int>> counts_, offsets_;   // per layer, per rank of the group (MPI's ints)
  std::vector<float> recv_;             // this rank's largest part of a gradient, allocated once
  CommBytes bytes_;
};

}  // namespace asteria
