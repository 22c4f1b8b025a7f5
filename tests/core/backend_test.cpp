// The Backend contract (core/backend.hpp) on every backend this build and machine have: queue
// order on a stream, events ordering two streams, copies between memory kinds, zero-filled
// allocations, and GEMM (transposes, strides, batches) against a triple loop in double.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "core/backend.hpp"

namespace asteria {
namespace {

std::vector<std::string> backends_present() {
  std::vector<std::string> out = {"cpu"};
  if (cuda_backend_available()) out.push_back("cuda");
  return out;
}

std::unique_ptr<Backend> open(const std::string& name) {
  return name == "cpu" ? make_cpu_backend() : make_cuda_backend(0);
}

class BackendContract : public ::testing::TestWithParam<std::string> {};

TEST_P(BackendContract, CopiesThroughDeviceAndPinnedMemoryInOrder) {
  auto be = open(GetParam());
  auto s = be->create_stream(StreamPriority::Normal);
  const size_t n = 1000;
  std::vector<float> host(n), back(n, -1.0f);
  for (size_t i = 0; i < n; ++i) host[i] = static_cast<float>(i) * 0.5f;
  float* dev = static_cast<float*>(be->allocate(n * sizeof(float), MemoryKind::Device));
  float* pinned = static_cast<float*>(be->allocate(n * sizeof(float), MemoryKind::PinnedHost));
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(pinned[i], 0.0f) << "allocations are zero-filled";
  be->copy(dev, host.data(), n * sizeof(float), *s);
  be->memset(dev, 0, 10 * sizeof(float), *s);   // queued after the copy: it wins
  be->copy(pinned, dev, n * sizeof(float), *s);
  be->copy(back.data(), pinned, n * sizeof(float), *s);
  s->synchronize();
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(back[i], i < 10 ? 0.0f : host[i]) << i;
  be->release(dev, MemoryKind::Device);
  be->release(pinned, MemoryKind::PinnedHost);
}

TEST_P(BackendContract, AnEventOrdersTwoStreams) {
  auto be = open(GetParam());
  auto producer = be->create_stream(StreamPriority::Low);
  auto consumer = be->create_stream(StreamPriority::Normal);
  auto ev = be->create_event();
  EXPECT_TRUE(ev->ready()) << "an event never recorded has passed";
  const size_t n = 1 << 20;
  std::vector<float> a(n, 3.0f), b(n, 0.0f);
  float* dev = static_cast<float*>(be->allocate(n * sizeof(float), MemoryKind::Device));
  for (int round = 0; round < 5; ++round) {
    a.assign(n, static_cast<float>(round + 1));
    be->copy(dev, a.data(), n * sizeof(float), *producer);
    ev->record(*producer);
    ev->wait(*consumer);
    be->copy(b.data(), dev, n * sizeof(float), *consumer);
    consumer->synchronize();
    EXPECT_TRUE(ev->ready());
    ASSERT_EQ(b.front(), round + 1.0f);
    ASSERT_EQ(b.back(), round + 1.0f);
  }
  be->release(dev, MemoryKind::Device);
}

// C = alpha op(A) op(B) + beta C, row-major, in double.
void reference_gemm(const GemmArgs& g, const float* A, const float* B, std::vector<double>& C, int batch) {
  for (int i = 0; i < g.m; ++i)
    for (int j = 0; j < g.n; ++j) {
      double acc = 0;
      for (int p = 0; p < g.k; ++p) {
        const double a = g.trans_a ? A[batch * g.stride_a + p * g.lda + i] : A[batch * g.stride_a + i * g.lda + p];
        const double b = g.trans_b ? B[batch * g.stride_b + j * g.ldb + p] : B[batch * g.stride_b + p * g.ldb + j];
        acc += a * b;
      }
      double& c = C[batch * g.stride_c + static_cast<size_t>(i) * g.ldc + j];
      c = g.alpha * acc + g.beta * c;
    }
}

TEST_P(BackendContract, GemmTransposesStridesAndBatches) {
  auto be = open(GetParam());
  auto s = be->create_stream(StreamPriority::Normal);
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-1, 1);
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      GemmArgs g;
      g.trans_a = ta, g.trans_b = tb, g.m = 37, g.n = 29, g.k = 53, g.alpha = 0.75f, g.beta = 0.5f, g.batch = 3;
      // Padded leading dimensions, as a head inside a fused row is.
      g.lda = (ta ? g.m : g.k) + 5, g.ldb = (tb ? g.k : g.n) + 3, g.ldc = g.n + 7;
      g.stride_a = static_cast<int64_t>(g.lda) * (ta ? g.k : g.m);
      g.stride_b = static_cast<int64_t>(g.ldb) * (tb ? g.n : g.k);
      g.stride_c = static_cast<int64_t>(g.ldc) * g.m;
      std::vector<float> A(g.stride_a * g.batch), B(g.stride_b * g.batch), C(g.stride_c * g.batch);
      for (float& x : A) x = u(rng);
      for (float& x : B) x = u(rng);
      for (float& x : C) x = u(rng);
      std::vector<double> expect(C.begin(), C.end());
      for (int b = 0; b < g.batch; ++b) reference_gemm(g, A.data(), B.data(), expect, b);
      auto up = [&](const std::vector<float>& h) {
        void* d = be->allocate(h.size() * sizeof(float), MemoryKind::Device);
        be->copy(d, h.data(), h.size() * sizeof(float), *s);
        return d;
      };
      void *dA = up(A), *dB = up(B), *dC = up(C);
      g.a = dA, g.b = dB, g.c = dC;
      be->gemm(g, *s);
      be->copy(C.data(), dC, C.size() * sizeof(float), *s);
      s->synchronize();
      for (size_t i = 0; i < C.size(); ++i)
        ASSERT_NEAR(C[i], expect[i], 1e-5 * (1 + std::abs(expect[i]))) << "ta " << ta << " tb " << tb << " at " << i;
      for (void* d : {dA, dB, dC}) be->release(d, MemoryKind::Device);
    }
}

INSTANTIATE_TEST_SUITE_P(Present, BackendContract, ::testing::ValuesIn(backends_present()),
                         [](const auto& info) { return info.param; });

TEST(Backend, CudaAvailabilitySaysWhy) {
  std::string why;
  if (cuda_backend_available(&why)) GTEST_SKIP() << "a CUDA device is present";
  EXPECT_FALSE(why.empty());
  try {
    make_cuda_backend(0);
    FAIL() << "make_cuda_backend succeeded without a device";
  } catch (const std::exception& e) {
    EXPECT_EQ(e.what(), why);
  }
}

}  // namespace
}  // namespace asteria
