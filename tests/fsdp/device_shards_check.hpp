#pragma once
// What the tests of the device's shards (fsdp/device_shards.hpp) share: device memory read and
// written through a backend's copies, ShardVectorOps for memory the host cannot read, and
// check_one_rank_of_two:
//
// One rank of a sharded plan of two, where only one device is (fsdp/device_shards.hpp on the
// GPU machine's single GPU, or on a backend whose device memory the host cannot read): rank 0's
// shards on `device`, its shard group a communicator that plays rank 1 (its parts of a gather
// are known values, its part of a reduce-scatter a known gradient). The gathered layers, the
// gradient shards after two micro-batches and the mean, and the parameters' round trip must
// hold exactly the values the host computes in the same order (fp32 adds, one multiply by 1/2):
// the device's copies, rotation, add and scale kernels checked bit for bit. Every device byte is
// read and written through the backend's copies.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "comm/communicator.hpp"
#include "comm/replica_mean.hpp"
#include "comm/topology.hpp"
#include "core/backend.hpp"
#include "fsdp/device_shards.hpp"
#include "fsdp/sharding.hpp"

namespace asteria::test_support {

// Device memory through the backend's copies only.
class DeviceIo {
 public:
  explicit DeviceIo(Backend& dev) : dev_(dev), stream_(dev.create_stream(StreamPriority::Low)) {}
  std::vector<float> read(const float* p, size_t n) {
    std::vector<float> out(n);
    if (n) dev_.copy(out.data(), p, n * sizeof(float), *stream_);
    stream_->synchronize();
    return out;
  }
  void write(float* p, const std::vector<float>& v) {
    if (!v.empty()) dev_.copy(p, v.data(), v.size() * sizeof(float), *stream_);
    stream_->synchronize();
  }

 private:
  Backend& dev_;
  std::unique_ptr<Stream> stream_;
};

// ShardVectorOps on memory the host cannot read: the host twins' arithmetic on values copied out.
class StagedVectorOps final : public ShardVectorOps {
 public:
  explicit StagedVectorOps(Backend& dev) : io_(dev) {}
  void add(float* acc, const float* x, size_t n) override {
    std::vector<float> a = io_.read(acc, n);
    const std::vector<float> b = io_.read(x, n);
    for (size_t i = 0; i < n; ++i) a[i] += b[i];
    io_.write(acc, a);
  }
  void rotate_left(float* x, size_t n, size_t first) override {
    std::vector<float> v = io_.read(x, n);
    std::rotate(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(first), v.end());
    io_.write(x, v);
  }
  void scale_to_mean(float* x, size_t n, int world) override {
    std::vector<float> v = io_.read(x, n);
    asteria::scale_to_mean(v.data(), n, world);
    io_.write(x, v);
  }
  double sum_of_squares(const float* x, size_t n) override {
    double s = 0;
    for (float v : io_.read(x, n)) s += static_cast<double>(v) * v;
    return s;
  }

 private:
  DeviceIo io_;
};

// What the simulated rank 1 holds: the value at position i of every layer (its shard of the
// parameters), and its gradient's value for element k of rank 0's part.
inline float peer_param(size_t i) { return 0.5f * static_cast<float>(i) + 0.1f; }
inline float peer_grad(size_t k) { return 0.25f * static_cast<float>(k + 1); }
inline float own_grad(int micro, size_t i) { return 0.37f * static_cast<float>(micro + 2) + 0.013f * static_cast<float>(i); }

// Rank 0 of two, the other rank simulated; buffers in `io`'s memory (null: host memory).
class SimulatedPeerCommunicator final : public Communicator {
 public:
  explicit SimulatedPeerCommunicator(DeviceIo* io) : io_(io) { set_timeout(60); }
  int rank() const override { return 0; }
  int size() const override { return 2; }
  std::string kind() const override { return "simulated-peer"; }
  Request all_gatherv(float* data, const std::vector<int>& counts, const std::vector<int>& offsets, std::string) override {
    std::vector<float> part(static_cast<size_t>(counts[1]));
    for (size_t k = 0; k < part.size(); ++k) part[k] = peer_param(static_cast<size_t>(offsets[1]) + k);
    write(data + offsets[1], part);
    return {};
  }
  Request reduce_scatterv(const float* send, float* recv, const std::vector<int>& counts, std::string) override {
    std::vector<float> mine = read(send, static_cast<size_t>(counts[0]));
    for (size_t k = 0; k < mine.size(); ++k) mine[k] += peer_grad(k);
    write(recv, mine);
    return {};
  }
  Request all_reduce(double*, size_t, std::string) override { return {}; }   // the peer adds 0
  Request all_reduce(float*, size_t, std::string) override { return {}; }
  Request all_gather(const float*, size_t, float*, std::string) override { return unused(); }
  Request reduce_scatter(const float*, float*, size_t, std::string) override { return unused(); }
  Request broadcast(void*, size_t, int, std::string) override { return unused(); }
  Request send(const void*, size_t, int, int, std::string) override { return unused(); }
  Request recv(void*, size_t, int, int, std::string) override { return unused(); }
  void barrier(const std::string&) override {}
  std::unique_ptr<Communicator> split(int, int) override { return std::make_unique<SimulatedPeerCommunicator>(io_); }

 private:
  Request unused() {
    ADD_FAILURE() << "a collective the shards do not use";
    return {};
  }
  std::vector<float> read(const float* p, size_t n) { return io_ ? io_->read(p, n) : std::vector<float>(p, p + n); }
  void write(float* p, const std::vector<float>& v) {
    if (io_) io_->write(p, v);
    else std::copy(v.begin(), v.end(), p);
  }
  DeviceIo* io_;
};

// Layers whose ranges shard_model shifts (the second's parts are not in rank order).
inline std::vector<ParamTable> simulated_peer_tables() {
  ParamTable a;
  a.add("a", {7, 5}, ParamClass::Matrix);
  a.add("n1", {5}, ParamClass::Norm);
  a.add("b", {2, 4}, ParamClass::Matrix);
  return {a, a};
}

// Whether some layer's parts are not in rank order (its ranges shifted): what the rotation of a
// reduce-scatter's gradient is for.
inline bool has_shifted_layer(const Sharding& layout) {
  for (int l = 0; l < static_cast<int>(layout.owned_tables().size()); ++l)
    if (layout.shards(l).offset(0) != 0) return true;
  return false;
}

inline void check_one_rank_of_two(Backend& device, ShardVectorOps& ops) {
  SimulatedPeerCommunicator host_world(nullptr);
  Topology topo;
  topo.world_size = 2;
  topo.ranks_per_node = 2;
  topo.world = &host_world;
  const std::vector<ParamTable> ts = simulated_peer_tables();
  Sharding layout(FsdpMode::Full, topo, ts, /*max_dim=*/3);
  ASSERT_TRUE(layout.sharded());
  const int L = static_cast<int>(ts.size());
  ASSERT_TRUE(has_shifted_layer(layout)) << "a layer's parts should not be in rank order";
  for (int l = 0; l < L; ++l)
    for (size_t k = 0; k < layout.count(l); ++k) layout.shard_params(l)[k] = peer_param(layout.offset(l) + k) + 1000.0f;

  DeviceIo io(device);
  DeviceShards shards(layout, device, ops, std::make_unique<SimulatedPeerCommunicator>(&io), nullptr, 2, 2, 60);
  shards.upload();
  for (int l = 0; l < L; ++l) {
    const size_t n = ts[l].numel, off = layout.offset(l), count = layout.count(l);
    float* whole = shards.params_in_flight().acquire(l, "layer");
    shards.gather(l, whole, "gather");
    const std::vector<float> got = io.read(whole, n);
    for (size_t i = 0; i < n; ++i)
      ASSERT_EQ(got[i], peer_param(i) + (i >= off && i < off + count ? 1000.0f : 0.0f)) << "layer " << l << " at " << i;
    shards.params_in_flight().release(l);
    std::vector<float> want(count, 0.0f);
    for (int micro = 0; micro < 2; ++micro) {
      std::vector<float> g(n);
      for (size_t i = 0; i < n; ++i) g[i] = own_grad(micro, i);
      float* gd = shards.grads_in_flight().acquire(l, "layer");
      io.write(gd, g);
      shards.reduce_scatter(l, gd, "reduce_scatter");
      shards.grads_in_flight().release(l);
      for (size_t k = 0; k < count; ++k) want[k] += own_grad(micro, off + k) + peer_grad(k);
    }
    shards.reduce_shard_over_replicas(l, "mean");
    for (float& w : want) w *= 0.5f;
    EXPECT_EQ(io.read(shards.shard_grads(l), count), want) << "layer " << l;
  }
  std::vector<float> before;
  for (int l = 0; l < L; ++l) before.insert(before.end(), layout.shard_params(l), layout.shard_params(l) + layout.count(l));
  for (int l = 0; l < L; ++l) std::fill(layout.shard_params(l), layout.shard_params(l) + layout.count(l), 0.0f);
  shards.download();
  std::vector<float> after;
  for (int l = 0; l < L; ++l) after.insert(after.end(), layout.shard_params(l), layout.shard_params(l) + layout.count(l));
  EXPECT_EQ(after, before);
}

}  // namespace asteria::test_support
