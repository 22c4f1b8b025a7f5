#pragma once
// Sharded training with the model on a device (runtime.backend cuda, distributed.fsdp full or
// hybrid; docs/DESIGN.md "FSDP"): the rank's shards of every layer's parameters and gradient and
// the whole-layer buffers in flight, all in the backend's device memory, and the collectives
// between them over device communicators (NCCL), with the host Sharding's layout, schedule and
// arithmetic:
//   gather(l)               the shard copied into its place in a whole-layer buffer, then the
//                           group's in-place all_gatherv (NCCL: one broadcast per owner's part,
//                           each its exact size: no padding travels or is allocated);
//   reduce_scatter(l)       the whole gradient rotated in place so that the parts are in rank
//                           order (shifted layouts; three reversals, no scratch layer), the
//                           group's reduce_scatterv (NCCL: one reduction per part) into a
//                           receive buffer, added to the gradient shard;
//   reduce_shard_over_replicas(l)  the shard all-reduced over the replica group and scaled to the mean
//                           over all ranks (hybrid across nodes).
// Sums are the collectives' and the fp32 adds of ShardVectorOps, in the host's order, so a
// shard's values follow the CPU run's for the same collective results.
//
// The host keeps the run's image of the shards (Sharding::shard_params: what checkpoints are
// written from and restored into); upload() / download() move it. Device memory is touched only
// through the backend's copies, ShardVectorOps and the communicators, never by the host, which
// tests/mpi/device_shards_test.cpp checks on a backend whose device bytes are scrambled.
//
// Threads: gather, reduce_scatter and reduce_shard_over_replicas run on the comm lane (between steps
// on the compute lane while the comm lane is idle) and use the communicators given, which
// nothing else uses, and a copy stream of their own; grad_sum_of_squares is the compute lane's.
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "comm/communicator.hpp"
#include "core/backend.hpp"
#include "fsdp/layer_slots.hpp"
#include "fsdp/shard_vector_ops.hpp"
#include "fsdp/sharding.hpp"

namespace asteria {

class DeviceShards {
 public:
  // layout: the host's sharding (sharded()). group: a device communicator of the same ranks as
  // layout.group(), in the same order; replicas: the same for layout.replicas() (null when it
  // has none). param_buffers / grad_buffers: the whole-layer buffers in flight
  // (fsdp/sharding_plan_ops.hpp), each layout.largest_layer() floats.
  DeviceShards(Sharding& layout, Backend& device, ShardVectorOps& ops, std::unique_ptr<Communicator> group,
               std::unique_ptr<Communicator> replicas, int param_buffers, int grad_buffers, double timeout_s);

  // Layer l's shard (layout.count(l) floats of device memory).
  float* shard_params(int l) { return params_ + at_[l]; }
  float* shard_grads(int l) { return grads_ + at_[l]; }
  LayerSlots& params_in_flight() { return param_slots_; }
  LayerSlots& grads_in_flight() { return grad_slots_; }

  // As Sharding's, on device memory (`whole`: a buffer of params_in_flight() or grads_in_flight()).
  void gather(int l, float* whole, const std::string& label);
  void reduce_scatter(int l, float* whole, const std::string& label);
  void reduce_shard_over_replicas(int l, const std::string& label);
  double grad_sum_of_squares(int l) { return ops_.sum_of_squares(shard_grads(l), layout_.count(l)); }

  // The host image's shards onto the device, and back (between steps).
  void upload();
  void download();

  // The device memory this holds, and what it holds for a layout: the shards of both, the receive
  // buffer and the buffers in flight (the estimate's params + grads + receive buffer of a sharded
  // rank, train/estimates/world_plan.cpp, count the same).
  size_t device_bytes() const;
  static size_t device_bytes(size_t shard_floats, size_t largest_shard, size_t largest_layer, int param_buffers,
                             int grad_buffers);

 private:
  void copy(float* dst, const float* src, size_t n);   // on the copy stream, waited for

  Sharding& layout_;
  Backend& device_;
  ShardVectorOps& ops_;
  std::unique_ptr<Communicator> group_, replicas_;
  std::unique_ptr<Stream> copies_;
  std::vector<size_t> at_;              // layer l's shard starts at at_[l]
  size_t shard_floats_ = 0, largest_shard_ = 1;
  BackendBuffer params_mem_, grads_mem_, recv_mem_;
  float* params_ = nullptr;             // their device memory as floats
  float* grads_ = nullptr;
  float* recv_ = nullptr;               // a reduce-scatter's result (this rank's largest part)
  LayerSlots param_slots_, grad_slots_;
};

}  // namespace asteria
