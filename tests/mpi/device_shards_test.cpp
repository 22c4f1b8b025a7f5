// The sharded GPU path's host side (fsdp/device_shards.hpp) where no GPU is: the device's shards
// on a backend whose device memory the host cannot read (tests/core/scrambled_device_backend.hpp),
// its collectives over a communicator with NCCL's semantics (device buffers, grouped broadcasts
// for the uneven gather, its own stream; here staged through host memory over MPI). Against the
// host's Sharding on the same ranks: the same gathered layers, the same gradient shards bit for
// bit after reduce-scatters of two micro-batches and the replicas' mean, the same bytes counted;
// device memory as accounted (the --dry-run's formula), one copy stream, and each communicator
// used by one thread.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <thread>
#include <vector>

#include "comm/mpi_communicator.hpp"
#include "comm/topology.hpp"
#include "fsdp/device_shards.hpp"
#include "fsdp/sharding.hpp"
#include "../core/scrambled_device_backend.hpp"
#include "../fsdp/device_shards_check.hpp"

using namespace asteria;
using asteria::test_support::DeviceIo;
using asteria::test_support::ScrambledDeviceBackend;
using asteria::test_support::StagedVectorOps;

namespace {

// NCCL's semantics over MPI: every buffer device memory (staged through host memory here), the
// uneven gather as one broadcast per owner's part, a request complete when its work is; and the
// contract that one thread uses a communicator.
class StagedDeviceCommunicator final : public Communicator {
 public:
  StagedDeviceCommunicator(std::unique_ptr<Communicator> host, Backend& dev) : host_(std::move(host)), io_(dev) {
    set_timeout(host_->timeout());
  }
  int rank() const override { return host_->rank(); }
  int size() const override { return host_->size(); }
  std::string kind() const override { return "staged-nccl"; }
  bool one_thread() const { return !mixed_threads_; }

  Request all_gather(const float*, size_t, float*, std::string) override { return unused(); }
  Request reduce_scatter(const float*, float*, size_t, std::string) override { return unused(); }
  Request all_gatherv(float* data, const std::vector<int>& counts, const std::vector<int>& offsets, std::string label) override {
    note_thread();
    for (int r = 0; r < size(); ++r) {
      if (counts[r] == 0) continue;
      std::vector<float> part = io_.read(data + offsets[r], static_cast<size_t>(counts[r]));
      Request q = host_->broadcast(part.data(), part.size() * sizeof(float), r, label);
      host_->wait(q);
      io_.write(data + offsets[r], part);
    }
    return {};
  }
  Request reduce_scatterv(const float* send, float* recv, const std::vector<int>& counts, std::string label) override {
    note_thread();
    size_t total = 0;
    for (int c : counts) total += static_cast<size_t>(c);
    const std::vector<float> in = io_.read(send, total);
    std::vector<float> out(static_cast<size_t>(counts[rank()]));
    Request q = host_->reduce_scatterv(in.data(), out.data(), counts, label);
    host_->wait(q);
    io_.write(recv, out);
    return {};
  }
  Request all_reduce(double*, size_t, std::string) override { return unused(); }
  Request all_reduce(float* data, size_t count, std::string label) override {
    note_thread();
    std::vector<float> v = io_.read(data, count);
    Request q = host_->all_reduce(v.data(), count, label);
    host_->wait(q);
    io_.write(data, v);
    return {};
  }
  Request broadcast(void*, size_t, int, std::string) override { return unused(); }
  Request send(const void*, size_t, int, int, std::string) override { return unused(); }
  Request recv(void*, size_t, int, int, std::string) override { return unused(); }
  void barrier(const std::string& label) override { host_->barrier(label); }
  std::unique_ptr<Communicator> split(int, int) override {
    unused();
    return nullptr;
  }

 private:
  Request unused() {
    ADD_FAILURE() << "the device's shards called a collective they do not use";
    return {};
  }
  void note_thread() {
    if (user_ == std::thread::id()) user_ = std::this_thread::get_id();
    if (user_ != std::this_thread::get_id()) mixed_threads_ = true;
  }
  std::unique_ptr<Communicator> host_;
  DeviceIo io_;
  std::thread::id user_;
  bool mixed_threads_ = false;
};

// The simulated peer's uneven layers (two alike: the second's ranges shifted) and a larger one.
std::vector<ParamTable> tables() {
  std::vector<ParamTable> t = test_support::simulated_peer_tables();
  ParamTable b;
  b.add("c", {11, 6}, ParamClass::Matrix);
  b.add("n2", {6}, ParamClass::Norm);
  t.push_back(b);
  return t;
}

float param_value(int l, size_t i) { return 0.5f * static_cast<float>(i) - 3.0f * static_cast<float>(l) + 0.1f; }
float grad_value(int rank, int micro, int l, size_t i) {
  return 0.37f * static_cast<float>((rank + 1) * (micro + 2)) + 0.013f * static_cast<float>(i) - static_cast<float>(l);
}

void check_mode(FsdpMode mode, int ranks_per_node) {
  auto world = make_mpi_world_communicator();
  world->set_timeout(60);
  Topology topo = make_topology(*world, ranks_per_node);
  topo.set_timeout(60);
  const std::vector<ParamTable> ts = tables();
  Sharding host(mode, topo, ts, /*max_dim=*/3);
  ASSERT_TRUE(host.sharded());
  const int L = static_cast<int>(ts.size());
  ASSERT_TRUE(test_support::has_shifted_layer(host)) << "a layer's parts should not be in rank order";
  for (int l = 0; l < L; ++l)
    for (size_t k = 0; k < host.count(l); ++k) host.shard_params(l)[k] = param_value(l, host.offset(l) + k);

  ScrambledDeviceBackend dev;
  StagedVectorOps ops(dev);
  auto group = std::make_unique<StagedDeviceCommunicator>(host.group().duplicate(), dev);
  StagedDeviceCommunicator* group_seen = group.get();
  std::unique_ptr<StagedDeviceCommunicator> replicas;
  if (host.replicas()) replicas = std::make_unique<StagedDeviceCommunicator>(host.replicas()->duplicate(), dev);
  StagedDeviceCommunicator* replicas_seen = replicas.get();
  DeviceShards shards(host, dev, ops, std::move(group), std::move(replicas), /*param_buffers=*/2, /*grad_buffers=*/2, 60);
  DeviceIo io(dev);

  // Memory: the shards, the receive buffer and the buffers in flight, all device memory.
  size_t shard_floats = 0, largest_shard = 1;
  for (int l = 0; l < L; ++l) {
    shard_floats += host.count(l);
    largest_shard = std::max(largest_shard, host.count(l));
  }
  EXPECT_EQ(shards.device_bytes(), DeviceShards::device_bytes(shard_floats, largest_shard, host.largest_layer(), 2, 2));
  EXPECT_EQ(dev.allocated[MemoryKind::Device], shards.device_bytes());
  EXPECT_EQ(dev.streams[StreamPriority::Normal], 1) << "one copy stream";

  shards.upload();
  host.take_bytes();
  // The collectives run on a lane of their own, as the trainer's comm lane runs them.
  std::thread comm_lane([&] {
    for (int l = 0; l < L; ++l) {
      const size_t n = ts[l].numel;
      std::vector<float> expected(n);
      host.gather(l, expected.data(), "host gather");
      float* whole = shards.params_in_flight().acquire(l, "layer");
      shards.gather(l, whole, "device gather");
      EXPECT_EQ(io.read(whole, n), expected) << "layer " << l;
      shards.params_in_flight().release(l);
      for (int micro = 0; micro < 2; ++micro) {
        std::vector<float> g(n);
        for (size_t i = 0; i < n; ++i) g[i] = grad_value(world->rank(), micro, l, i);
        float* gd = shards.grads_in_flight().acquire(l, "layer");
        io.write(gd, g);
        host.reduce_scatter(l, g.data(), "host reduce_scatter");
        shards.reduce_scatter(l, gd, "device reduce_scatter");
        shards.grads_in_flight().release(l);
      }
      host.reduce_over_replicas(l, host.shard_grads(l), "host all_reduce");
      shards.reduce_shard_over_replicas(l, "device all_reduce");
      const std::vector<float> want(host.shard_grads(l), host.shard_grads(l) + host.count(l));
      EXPECT_EQ(io.read(shards.shard_grads(l), host.count(l)), want) << "layer " << l << " rank " << world->rank();
    }
  });
  comm_lane.join();
  // Host and device counted the same bytes: twice one side's.
  const CommBytes both = host.take_bytes();
  size_t group_bytes = 0;
  for (int l = 0; l < L; ++l) group_bytes += 3 * (ts[l].numel - host.count(l)) * sizeof(float);   // a gather, two reduce-scatters
  EXPECT_EQ(both.group, 2 * group_bytes);
  if (host.replicas()) {
    EXPECT_GT(both.replicas, 0u);
  }
  EXPECT_TRUE(group_seen->one_thread());
  if (replicas_seen) {
    EXPECT_TRUE(replicas_seen->one_thread());
  }
  // The device's parameters back into the host image.
  std::vector<float> before;
  for (int l = 0; l < L; ++l) before.insert(before.end(), host.shard_params(l), host.shard_params(l) + host.count(l));
  for (int l = 0; l < L; ++l) std::fill(host.shard_params(l), host.shard_params(l) + host.count(l), -1.0f);
  shards.download();
  std::vector<float> after;
  for (int l = 0; l < L; ++l) after.insert(after.end(), host.shard_params(l), host.shard_params(l) + host.count(l));
  EXPECT_EQ(after, before);
}

}  // namespace

TEST(DeviceShards, FullShardingMatchesTheHostsBitForBit) {
  auto world = make_mpi_world_communicator();
  if (world->size() < 2) GTEST_SKIP() << "sharding needs at least 2 ranks";
  check_mode(FsdpMode::Full, 0);
}

TEST(DeviceShards, HybridShardingMatchesTheHostsBitForBitAcrossReplicas) {
  auto world = make_mpi_world_communicator();
  if (world->size() < 4) GTEST_SKIP() << "hybrid with replicas needs 2 nodes of 2 ranks";
  check_mode(FsdpMode::Hybrid, 2);
}
