#include "fsdp/device_shards.hpp"

#include <algorithm>

#include "core/error.hpp"

namespace asteria {

namespace {

float* as_floats(const BackendBuffer& b) { return reinterpret_cast<float*>(b.data()); }

}  // namespace

DeviceShards::DeviceShards(Sharding& layout, Backend& device, ShardVectorOps& ops, std::unique_ptr<Communicator> group,
                           std::unique_ptr<Communicator> replicas, int param_buffers, int grad_buffers, double timeout_s)
    : layout_(layout), device_(device), ops_(ops), group_(std::move(group)), replicas_(std::move(replicas)),
      copies_(device.create_stream(StreamPriority::Normal)),
      param_slots_("parameter", param_buffers, layout.largest_layer(), timeout_s, &device),
      grad_slots_("gradient", grad_buffers, layout.largest_layer(), timeout_s, &device) {
  ASTERIA_ASSERT(layout_.sharded(), "device shards of an unsharded run");
  ASTERIA_ASSERT(group_->size() == layout_.group_size() && group_->rank() == layout_.group_rank(),
                 "the device's shard group is not the host's: rank ", group_->rank(), " of ", group_->size());
  ASTERIA_ASSERT((replicas_ != nullptr) == (layout_.replicas() != nullptr), "the device's replica group is not the host's");
  const int L = static_cast<int>(layout_.owned_tables().size());
  for (int l = 0; l < L; ++l) {
    at_.push_back(shard_floats_);
    shard_floats_ += layout_.count(l);
    largest_shard_ = std::max(largest_shard_, layout_.count(l));
  }
  params_mem_ = BackendBuffer(device, std::max<size_t>(shard_floats_, 1) * sizeof(float), MemoryKind::Device);
  grads_mem_ = BackendBuffer(device, std::max<size_t>(shard_floats_, 1) * sizeof(float), MemoryKind::Device);
  recv_mem_ = BackendBuffer(device, largest_shard_ * sizeof(float), MemoryKind::Device);
  params_ = as_floats(params_mem_);
  grads_ = as_floats(grads_mem_);
  recv_ = as_floats(recv_mem_);
}

void DeviceShards::copy(float* dst, const float* src, size_t n) {
  if (n == 0) return;
  device_.copy(dst, src, n * sizeof(float), *copies_);
  copies_->synchronize();
}

void DeviceShards::gather(int l, float* whole, const std::string& label) {
  const size_t n = layout_.count(l);
  copy(whole + layout_.offset(l), shard_params(l), n);
  Request r = group_->all_gatherv(whole, layout_.part_counts(l), layout_.part_offsets(l), label);
  group_->wait(r);
  layout_.add_bytes({(layout_.shards(l).numel - n) * sizeof(float), 0});
}

void DeviceShards::reduce_scatter(int l, float* whole, const std::string& label) {
  const size_t n = layout_.count(l);
  const LayerShards& sh = layout_.shards(l);
  // The parts in rank order, as the host's reduce_scatter has them (its std::rotate).
  ops_.rotate_left(whole, sh.numel, sh.offset(0));
  Request r = group_->reduce_scatterv(whole, recv_, layout_.part_counts(l), label);
  group_->wait(r);
  ops_.add(shard_grads(l), recv_, n);
  layout_.add_bytes({(sh.numel - n) * sizeof(float), 0});
}

void DeviceShards::reduce_shard_over_replicas(int l, const std::string& label) {
  const size_t n = layout_.count(l);
  if (replicas_) {
    Request r = replicas_->all_reduce(shard_grads(l), n, label + " (across replicas)");
    replicas_->wait(r);
    layout_.add_bytes({0, 2 * (replicas_->size() - 1) * n * sizeof(float) / replicas_->size()});
  }
  ops_.scale_to_mean(shard_grads(l), n, layout_.world_size());
}

void DeviceShards::upload() {
  for (int l = 0; l < static_cast<int>(at_.size()); ++l) copy(shard_params(l), layout_.shard_params(l), layout_.count(l));
}

void DeviceShards::download() {
  for (int l = 0; l < static_cast<int>(at_.size()); ++l) copy(layout_.shard_params(l), shard_params(l), layout_.count(l));
}

size_t DeviceShards::device_bytes() const {
  return params_mem_.size() + grads_mem_.size() + recv_mem_.size() + param_slots_.bytes() + grad_slots_.bytes();
}

size_t DeviceShards::device_bytes(size_t shard_floats, size_t largest_shard, size_t largest_layer, int param_buffers,
                                  int grad_buffers) {
  return (2 * std::max<size_t>(shard_floats, 1) + std::max<size_t>(largest_shard, 1) +
          static_cast<size_t>(param_buffers + grad_buffers) * largest_layer) * sizeof(float);
}

}  // namespace asteria
