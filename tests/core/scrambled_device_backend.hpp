#pragma once
// A Backend whose device memory the host cannot read (the CUDA backend's case, which cannot run
// here): the tests of code that runs on device memory (the tiers, the device's shards) check on
// it that only the backend's copies and memsets touch that memory.
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <string>

#include "core/backend.hpp"
#include "core/error.hpp"

namespace asteria::test_support {

// Host memory standing in for device memory that the host cannot address: device bytes are kept
// XOR kKey, so reading or writing them directly yields garbage. Copies run when queued (which
// the contract allows); streams and events are the CPU backend's.
class ScrambledDeviceBackend final : public Backend {
 public:
  static constexpr uint8_t kKey = 0xA5;

  std::string name() const override { return "scrambled-device"; }
  bool device_memory_is_host() const override { return false; }
  void* allocate(size_t bytes, MemoryKind kind) override {
    auto* p = static_cast<uint8_t*>(cpu_->allocate(bytes, kind));
    allocated[kind] += bytes;
    if (kind == MemoryKind::Device) {
      for (size_t i = 0; i < bytes; ++i) p[i] = kKey;   // zeros, scrambled
      device_.emplace(p, bytes);
    }
    return p;
  }
  void release(void* p, MemoryKind kind) override {
    device_.erase(static_cast<uint8_t*>(p));
    cpu_->release(p, kind);
  }
  std::unique_ptr<Stream> create_stream(StreamPriority priority) override {
    ++streams[priority];
    return cpu_->create_stream(priority);
  }
  std::unique_ptr<Event> create_event() override { return cpu_->create_event(); }
  void copy(void* dst, const void* src, size_t bytes, Stream& s) override {
    s.synchronize();
    const bool from_device = is_device(src, bytes), to_device = is_device(dst, bytes);
    const auto* in = static_cast<const uint8_t*>(src);
    auto* out = static_cast<uint8_t*>(dst);
    for (size_t i = 0; i < bytes; ++i) {
      const uint8_t v = from_device ? in[i] ^ kKey : in[i];
      out[i] = to_device ? v ^ kKey : v;
    }
    if (to_device) to_device_bytes += bytes;
    if (from_device) from_device_bytes += bytes;
  }
  void memset(void* dst, int value, size_t bytes, Stream& s) override {
    s.synchronize();
    const uint8_t v = static_cast<uint8_t>(value) ^ (is_device(dst, bytes) ? kKey : 0);
    std::memset(dst, v, bytes);
  }
  void gemm(const GemmArgs&, Stream&) override { fail("the scrambled backend has no GEMM"); }

  // Whether [p, p + bytes) lies in one device allocation (a copy never straddles two kinds).
  bool is_device(const void* p, size_t bytes) const {
    const auto* b = static_cast<const uint8_t*>(p);
    auto it = device_.upper_bound(b);
    if (it == device_.begin()) return false;
    --it;
    return b >= it->first && b + bytes <= it->first + it->second;
  }

  std::map<MemoryKind, size_t> allocated;
  std::map<StreamPriority, int> streams;
  size_t to_device_bytes = 0, from_device_bytes = 0;

 private:
  std::unique_ptr<Backend> cpu_ = make_cpu_backend();
  std::map<const uint8_t*, size_t> device_;   // start -> bytes
};

}  // namespace asteria::test_support
