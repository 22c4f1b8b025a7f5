#include "fsdp/sharding.hpp"

#include <algorithm>
#include <cstdint>

#include "core/error.hpp"
#include "comm/replica_mean.hpp"
#include "optim/blocks.hpp"

namespace asteria {

ParamTable shard_table(const ParamTable& table, const LayerShards& shards, int group_rank, int64_t max_dim) {
  const size_t begin = shards.offset(group_rank), end = begin + shards.count(group_rank);
  ParamTable out;
  for (const ParamEntry& e : table.entries) {
    // The units of the entry, as (first row, rows); a 1-D tensor is one unit.
    std::vector<std::pair<int64_t, int64_t>> units =
        e.shape.size() == 2 ? split_dimension(e.shape[0], max_dim) : std::vector<std::pair<int64_t, int64_t>>{{0, 1}};
    const size_t row_numel = e.shape.size() == 2 ? static_cast<size_t>(e.shape[1]) : e.numel;
    for (auto [r0, rn] : units) {
      const size_t at = e.offset + static_cast<size_t>(r0) * row_numel;
      if (at < begin || at >= end) continue;
      ASTERIA_ASSERT(at + static_cast<size_t>(rn) * row_numel <= end, e.name, ": a unit crosses a shard boundary");
      ParamEntry p = e;
      if (e.shape.size() == 2) p.shape = {rn, e.shape[1]};
      p.offset = at - begin;
      p.numel = static_cast<size_t>(rn) * row_numel;
      if (units.size() > 1) {   // a row-block of a tensor cut into several units
        p.row_offset = r0;
        p.tensor_rows = e.shape[0];
      }
      out.entries.push_back(std::move(p));
    }
  }
  out.numel = end - begin;
  size_t covered = 0;
  for (const ParamEntry& p : out.entries) covered += p.numel;
  ASTERIA_ASSERT(covered == out.numel, "shard of ", out.numel, " floats holds units of ", covered);
  return out;
}

Sharding::Sharding(FsdpMode mode, Topology& topo, const std::vector<ParamTable>& tables, int64_t max_dim)
    : mode_(mode), world_(topo.world_size) {
  if (mode == FsdpMode::Full) {
    group_ = topo.world;
    replicas_ = nullptr;
  } else if (mode == FsdpMode::Hybrid) {
    if (!topo.uniform)
      fail("distributed.fsdp hybrid shards in each node and replicates across them, so every node needs the same "
           "number of ranks; the hosts run ", topo.describe_hosts(), " (launch as many ranks on each host, or use "
           "distributed.fsdp full or none)");
    group_ = topo.intra.get();
    replicas_ = topo.nodes > 1 ? topo.inter.get() : nullptr;
  } else {  // None
    local_ = make_local_communicator();
    group_ = local_.get();
    replicas_ = world_ > 1 ? topo.world : nullptr;
  }
  if (replicas_ && replicas_->size() == 1) replicas_ = nullptr;
  // The comm lane's collectives on communicators of their own (communicator.hpp "Threads").
  if (group_->size() > 1) lane_group_ = group_->duplicate();
  if (replicas_) lane_replicas_ = replicas_->duplicate();
  size_t largest = 1;
  shards_ = shard_model(tables, max_dim, group_->size());
  for (size_t l = 0; l < tables.size(); ++l) {
    const ParamTable& t = tables[l];
    const LayerShards& sh = shards_[l];
    // Unsharded: the whole tables, so a one-rank run's optimizer (and checkpoint) keeps whole tensors.
    owned_.push_back(group_->size() > 1 ? shard_table(t, sh, group_->rank(), max_dim) : t);
    ASTERIA_CHECK(t.numel <= static_cast<size_t>(INT32_MAX), "a layer of ", t.numel,
                  " parameters is more than one MPI collective can address (2^31 - 1 floats)");
    std::vector<int>& counts = counts_.emplace_back(), &offsets = offsets_.emplace_back();
    for (int r = 0; r < sh.world(); ++r) {
      counts.push_back(static_cast<int>(sh.count(r)));
      offsets.push_back(static_cast<int>(sh.offset(r)));
    }
    largest = std::max(largest, sh.count(group_->rank()));
    largest_layer_ = std::max(largest_layer_, t.numel);
  }
  if (sharded()) {
    recv_.assign(largest, 0.0f);
    size_t at = 0;
    for (int l = 0; l < static_cast<int>(tables.size()); ++l) {
      shard_at_.push_back(at);
      at += count(l);
    }
    shard_params_.resize(at);
    shard_grads_.resize(at);
  }
}

void Sharding::zero_shard_grads(int layer) {
  float* g = shard_grads(layer);
  std::fill(g, g + count(layer), 0.0f);
}

void Sharding::gather(int layer, float* whole, const std::string& label) {
  ASTERIA_ASSERT(sharded());
  std::copy(shard_params(layer), shard_params(layer) + count(layer), whole + offset(layer));
  // In place and unpadded: each owner's part of the flat buffer, sent to every other rank.
  Request r = lane_group_->all_gatherv(whole, counts_[layer], offsets_[layer], label);
  lane_group_->wait(r);
  bytes_.group += (shards_[layer].numel - count(layer)) * sizeof(float);
}

void Sharding::reduce_scatter(int layer, float* whole, const std::string& label) {
  ASTERIA_ASSERT(sharded());
  const size_t n = count(layer);
  // The send buffer holds the ranks' parts in rank order: the whole gradient as it is, rotated
  // so that rank 0's range comes first when the layer's ranges are shifted (in place: the
  // buffer is given back after this).
  const LayerShards& sh = shards_[layer];
  if (sh.offset(0) != 0) std::rotate(whole, whole + sh.offset(0), whole + sh.numel);
  Request r = lane_group_->reduce_scatterv(whole, recv_.data(), counts_[layer], label);
  lane_group_->wait(r);
  float* acc = shard_grads(layer);
  for (size_t i = 0; i < n; ++i) acc[i] += recv_[i];
  bytes_.group += (shards_[layer].numel - n) * sizeof(float);
}

void Sharding::reduce_over_replicas(int layer, float* part, const std::string& label) {
  if (!reduces()) return;
  const size_t n = count(layer);
  if (Communicator* c = device_replicas_ ? device_replicas_ : lane_replicas_.get()) {
    Request r = c->all_reduce(part, n, sharded() ? label + " (across replicas)" : label);
    c->wait(r);
    bytes_.replicas += 2 * (c->size() - 1) * n * sizeof(float) / c->size();
  }
  if (device_replicas_)
    cuda::scale_to_mean(part, n, world_);
  else
    scale_to_mean(part, n, world_);
}

void Sharding::use_device_replicas(Communicator& comm) {
  ASTERIA_ASSERT(!sharded() && replicas_ && comm.size() == replicas_->size() && comm.rank() == replicas_->rank(),
                 "device replicas: only replicated runs, over the replica group's ranks");
  device_replicas_ = &comm;
}

void Sharding::sum_over_group(double* data, size_t count, const std::string& label) {
  if (!sharded()) return;
  Request r = group_->all_reduce(data, count, label);
  group_->wait(r);
}

CommBytes Sharding::take_bytes() {
  const CommBytes b = bytes_;
  bytes_ = CommBytes{};
  return b;
}

}  // namespace asteria
