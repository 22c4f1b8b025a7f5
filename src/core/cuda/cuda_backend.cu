// The CUDA backend: device memory (cudaMalloc), pinned host memory (cudaHostAlloc), streams with
// priorities (the staging lane's Low is the device's lowest), events, cuBLASLt GEMM.
#include <cuda_runtime.h>

#include <cstring>

#include "core/backend.hpp"
#include "core/cuda/cublaslt_gemm.hpp"
#include "core/cuda/device_buffer.hpp"
#include "core/cuda/cuda_check.hpp"

namespace asteria {

namespace {

class CudaStream final : public Stream {
 public:
  explicit CudaStream(int priority) {
    ASTERIA_CUDA_CHECK(cudaStreamCreateWithPriority(&s_, cudaStreamNonBlocking, priority));
  }
  ~CudaStream() override { cudaStreamDestroy(s_); }
  void synchronize() override { ASTERIA_CUDA_CHECK(cudaStreamSynchronize(s_)); }
  cudaStream_t get() const { return s_; }
  void* native_handle() override { return s_; }

 private:
  cudaStream_t s_ = nullptr;
};

cudaStream_t raw(Stream& s) { return static_cast<CudaStream&>(s).get(); }

class CudaEvent final : public Event {
 public:
  CudaEvent() { ASTERIA_CUDA_CHECK(cudaEventCreateWithFlags(&e_, cudaEventDisableTiming)); }
  ~CudaEvent() override { cudaEventDestroy(e_); }
  void record(Stream& s) override { ASTERIA_CUDA_CHECK(cudaEventRecord(e_, raw(s))); }
  void wait(Stream& s) override { ASTERIA_CUDA_CHECK(cudaStreamWaitEvent(raw(s), e_, 0)); }
  void synchronize() override { ASTERIA_CUDA_CHECK(cudaEventSynchronize(e_)); }
  bool ready() override {
    const cudaError_t e = cudaEventQuery(e_);
    if (e == cudaErrorNotReady) return false;
    ASTERIA_CUDA_CHECK(e);
    return true;
  }

 private:
  cudaEvent_t e_ = nullptr;
};

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(int device) : device_(device) {
    ASTERIA_CUDA_CHECK(cudaSetDevice(device));
    cudaDeviceProp prop{};
    ASTERIA_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
    name_ = "cuda:" + std::to_string(device) + " (" + prop.name + ")";
    ASTERIA_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&lowest_, &highest_));
  }
  std::string name() const override { return name_; }
  bool device_memory_is_host() const override { return false; }
  void* allocate(size_t bytes, MemoryKind kind) override {
    void* p = nullptr;
    const size_t n = bytes ? bytes : 1;
    if (kind == MemoryKind::Device) {
      p = cuda::device_allocate_zeroed(n);   // says how much is free when it cannot
    } else {
      ASTERIA_CUDA_CHECK(cudaHostAlloc(&p, n, cudaHostAllocDefault));
      std::memset(p, 0, n);
    }
    return p;
  }
  void release(void* p, MemoryKind kind) override {
    if (kind == MemoryKind::Device)
      cuda::device_release(p);
    else
      cudaFreeHost(p);
  }
  std::unique_ptr<Stream> create_stream(StreamPriority priority) override {
    // Greater numbers are lower priorities on CUDA; the lowest is 0, the default streams' own, so
    // a Normal stream takes the greatest for Low to be below it.
    return std::make_unique<CudaStream>(priority == StreamPriority::Low ? lowest_ : highest_);
  }
  std::unique_ptr<Event> create_event() override { return std::make_unique<CudaEvent>(); }
  void copy(void* dst, const void* src, size_t bytes, Stream& s) override {
    ASTERIA_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, raw(s)));
  }
  void memset(void* dst, int value, size_t bytes, Stream& s) override {
    ASTERIA_CUDA_CHECK(cudaMemsetAsync(dst, value, bytes, raw(s)));
  }
  void gemm(const GemmArgs& g, Stream& s) override { cuda::lt_gemm(g, raw(s)); }

 private:
  int device_ = 0;
  int lowest_ = 0, highest_ = 0;
  std::string name_;
};

}  // namespace

bool cuda_backend_available(std::string* why) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess || n == 0) {
    if (why) *why = e != cudaSuccess ? std::string("no CUDA device: ") + cudaGetErrorString(e) : "no CUDA device";
    cudaGetLastError();   // clear the sticky error of the failed query
    return false;
  }
  return true;
}

int cuda_device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return n;
}

bool cuda_device_memory(int device, DeviceMemory* out, std::string* why) {
  if (!cuda_backend_available(why)) return false;
  size_t free = 0, total = 0;
  int current = 0;
  cudaError_t e = cudaGetDevice(&current);
  if (e == cudaSuccess) e = cudaSetDevice(device);
  if (e == cudaSuccess) e = cudaMemGetInfo(&free, &total);
  cudaSetDevice(current);
  if (e != cudaSuccess) {
    if (why) *why = std::string("cudaMemGetInfo on device ") + std::to_string(device) + ": " + cudaGetErrorString(e);
    cudaGetLastError();
    return false;
  }
  *out = {free, total};
  return true;
}

std::unique_ptr<Backend> make_cuda_backend(int device) {
  std::string why;
  ASTERIA_CHECK(cuda_backend_available(&why), why);
  return std::make_unique<CudaBackend>(device);
}

}  // namespace asteria
