// The CPU backend: memory is host memory (both kinds), streams are ordered queues, each run by
// its own thread, events are positions in a queue, GEMM is OpenBLAS (core/cpu/gemm.hpp).
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <mutex>
#include <new>
#include <thread>

#include "core/backend.hpp"
#include "core/cpu/gemm.hpp"
#include "core/error.hpp"

namespace asteria {

namespace {

// Tasks run in order on the stream's thread; `done` counts the tasks that have run.
class CpuStream final : public Stream {
 public:
  CpuStream() : thread_([this] { loop(); }) {}
  ~CpuStream() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  // The position of the task in the queue (1-based).
  uint64_t enqueue(std::function<void()> task) {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(task));
    cv_.notify_all();
    return ++queued_;
  }
  void wait_for(uint64_t position) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return done_ >= position; });
    if (error_) std::rethrow_exception(error_);
  }
  bool passed(uint64_t position) {
    std::lock_guard<std::mutex> lock(mu_);
    return done_ >= position;
  }
  uint64_t position() {
    std::lock_guard<std::mutex> lock(mu_);
    return queued_;
  }
  void synchronize() override { wait_for(position()); }

 private:
  void loop() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;
      std::function<void()> task = std::move(queue_.front());
      queue_.pop_front();
      lock.unlock();
      try {
        task();
      } catch (...) {
        std::lock_guard<std::mutex> relock(mu_);
        if (!error_) error_ = std::current_exception();
      }
      lock.lock();
      ++done_;
      cv_.notify_all();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  uint64_t queued_ = 0, done_ = 0;
  bool stop_ = false;
  std::exception_ptr error_;
  std::thread thread_;
};

class CpuEvent final : public Event {
 public:
  void record(Stream& s) override {
    stream_ = &static_cast<CpuStream&>(s);
    position_ = stream_->position();
  }
  void wait(Stream& s) override {
    if (!stream_ || &s == stream_) return;   // a stream is ordered with itself
    CpuStream* src = stream_;
    const uint64_t pos = position_;
    static_cast<CpuStream&>(s).enqueue([src, pos] { src->wait_for(pos); });
  }
  void synchronize() override {
    if (stream_) stream_->wait_for(position_);
  }
  bool ready() override { return !stream_ || stream_->passed(position_); }

 private:
  CpuStream* stream_ = nullptr;
  uint64_t position_ = 0;
};

class CpuBackend final : public Backend {
 public:
  std::string name() const override { return "cpu"; }
  bool device_memory_is_host() const override { return true; }
  void* allocate(size_t bytes, MemoryKind) override {
    constexpr size_t kPage = 4096;   // the contract's alignment, for direct I/O
    const size_t rounded = (bytes + kPage - 1) / kPage * kPage;
    void* p = std::aligned_alloc(kPage, rounded ? rounded : kPage);
    if (!p) throw std::bad_alloc();
    std::memset(p, 0, rounded ? rounded : kPage);
    return p;
  }
  void release(void* p, MemoryKind) override { std::free(p); }
  std::unique_ptr<Stream> create_stream(StreamPriority) override { return std::make_unique<CpuStream>(); }
  std::unique_ptr<Event> create_event() override { return std::make_unique<CpuEvent>(); }
  void copy(void* dst, const void* src, size_t bytes, Stream& s) override {
    static_cast<CpuStream&>(s).enqueue([=] { std::memcpy(dst, src, bytes); });
  }
  void memset(void* dst, int value, size_t bytes, Stream& s) override {
    static_cast<CpuStream&>(s).enqueue([=] { std::memset(dst, value, bytes); });
  }
  void gemm(const GemmArgs& g, Stream& s) override {
    ASTERIA_CHECK(g.a_type == ScalarType::F32 && g.c_type == ScalarType::F32,
                  "the CPU backend's GEMM is fp32 only (it trains in fp32)");
    static_cast<CpuStream&>(s).enqueue([g] {
      for (int i = 0; i < g.batch; ++i)
        cpu::gemm(g.trans_a, g.trans_b, g.m, g.n, g.k, g.alpha, static_cast<const float*>(g.a) + i * g.stride_a,
                  g.lda, static_cast<const float*>(g.b) + i * g.stride_b, g.ldb, g.beta,
                  static_cast<float*>(g.c) + i * g.stride_c, g.ldc);
    });
  }
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend() { return std::make_unique<CpuBackend>(); }

}  // namespace asteria
