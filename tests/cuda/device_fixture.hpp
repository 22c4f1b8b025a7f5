#pragma once
// What the CUDA tests share: a fixture that skips (with the reason) where no GPU is, opens the
// CUDA backend with one stream made the thread's current one (so the ops run on it), and moves
// host vectors to and from device memory it frees at the end; and random test inputs.
#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/backend.hpp"
#include "core/cuda/cuda_context.hpp"

namespace asteria::testing {

class OnDevice : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!cuda_backend_available(&why)) GTEST_SKIP() << "no GPU: " << why;
    be_ = make_cuda_backend(0);
    stream_ = be_->create_stream(StreamPriority::Normal);
    scope_ = std::make_unique<cuda::StreamScope>(static_cast<cudaStream_t>(stream_->native_handle()));
  }
  void TearDown() override {
    if (!be_) return;
    stream_->synchronize();
    for (void* p : owned_) be_->release(p, MemoryKind::Device);
    scope_.reset();
  }
  // A device copy of h (16 bytes of slack past its end), there when up() returns: also for work
  // on other streams (a communicator's).
  template <class T>
  T* up(const std::vector<T>& h) {
    void* d = be_->allocate(h.size() * sizeof(T) + 16, MemoryKind::Device);
    owned_.push_back(d);
    be_->copy(d, h.data(), h.size() * sizeof(T), *stream_);
    stream_->synchronize();
    return static_cast<T*>(d);
  }
  template <class T>
  std::vector<T> down(const T* d, size_t n) {
    std::vector<T> h(n);
    be_->copy(h.data(), d, n * sizeof(T), *stream_);
    stream_->synchronize();
    return h;
  }

  std::unique_ptr<Backend> be_;
  std::unique_ptr<Stream> stream_;
  std::unique_ptr<cuda::StreamScope> scope_;
  std::vector<void*> owned_;
};

inline std::vector<float> random_vector(size_t n, unsigned seed, float lo = -1, float hi = 1) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

}  // namespace asteria::testing
