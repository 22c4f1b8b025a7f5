#pragma once
// The hardware seam (docs/DESIGN.md "Backends"): memory per tier, copies, ordered streams with
// events, and GEMM. Nothing above this header names a device library.
//
// Model ops are the other half of the seam: each op's header (src/model/ops/<op>.hpp) declares
// one signature, defined once per backend (ops/cpu/<op>.cpp, ops/cuda/<op>.cu); layers call the
// op, never BLAS or cuBLAS. A CUDA op runs on the calling thread's current stream
// (cuda::StreamScope) and takes device pointers.
//
// Contracts:
//  - Work queued on one Stream runs in queue order; different streams are unordered unless an
//    Event orders them (record on one, wait on the other).
//  - copy / memset / gemm return once queued; the memory they touch must stay valid until the
//    stream passes them (Stream::synchronize or an Event).
//  - MemoryKind::Device is the compute memory (host memory on the CPU backend:
//    device_memory_is_host()); PinnedHost is host memory the device copies to and from
//    asynchronously (plain host memory on the CPU). Host memory from allocate() is 4096-byte
//    aligned (direct I/O reads into it); device memory is touched only through copy / memset /
//    gemm / ops unless device_memory_is_host().
//  - Errors throw asteria::Error with the library's message.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

namespace asteria {

enum class MemoryKind { Device, PinnedHost };
// Normal: the training's (on CUDA the device's greatest priority: its kernels go first);
// Low: the staging lane's tier moves and snapshots, the refreshes on the device (the least,
// which is also the default streams' priority).
enum class StreamPriority { Normal, Low };
enum class ScalarType { F32, BF16 };

inline size_t scalar_bytes(ScalarType t) { return t == ScalarType::F32 ? 4 : 2; }

// runtime.backend: where the model and its update run. Auto is resolved when the config loads
// (Cuda when a device is visible and the build has the backend: core/cuda_visibility.hpp; else
// Cpu): never Auto after.
enum class BackendKind { Auto, Cpu, Cuda };
// runtime.precision: the GEMMs' operands. Auto is resolved when the config loads (Bf16 on
// Cuda, Fp32 on Cpu): never Auto after.
enum class ComputePrecision { Auto, Fp32, Bf16 };

inline const char* to_string(BackendKind b) {
  return b == BackendKind::Cuda ? "cuda" : b == BackendKind::Cpu ? "cpu" : "auto";
}
inline const char* to_string(ComputePrecision p) {
  switch (p) {
    case ComputePrecision::Auto: return "auto";
    case ComputePrecision::Fp32: return "fp32";
    case ComputePrecision::Bf16: return "bf16";
  }
  return "?";
}

class Stream {
 public:
  virtual ~Stream() = default;
  virtual void synchronize() = 0;   // returns when everything queued so far has run
  // The library's stream (cudaStream_t on CUDA, for cuda::StreamScope); null on the CPU.
  virtual void* native_handle() { return nullptr; }
};

class Event {
 public:
  virtual ~Event() = default;
  virtual void record(Stream& s) = 0;   // marks the point s has reached in its queue
  virtual void wait(Stream& s) = 0;     // s runs nothing queued after this until the mark passes
  virtual void synchronize() = 0;       // the calling thread waits for the mark
  virtual bool ready() = 0;             // the mark has passed (true when never recorded)
};

// Row-major C[m, n] = alpha * op(A)[m, k] * op(B)[k, n] + beta * C, lda/ldb/ldc row strides in
// elements, `batch` independent products at element strides stride_a/_b/_c. A and B share
// a_type; C is c_type; the products accumulate in fp32 (no TF32: fp32 results match the CPU).
struct GemmArgs {
  bool trans_a = false, trans_b = false;
  int m = 0, n = 0, k = 0;
  float alpha = 1, beta = 0;
  const void* a = nullptr;
  int lda = 0;
  const void* b = nullptr;
  int ldb = 0;
  void* c = nullptr;
  int ldc = 0;
  ScalarType a_type = ScalarType::F32, c_type = ScalarType::F32;
  int batch = 1;
  int64_t stride_a = 0, stride_b = 0, stride_c = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;   // "cpu", "cuda:0 (NVIDIA H200)"
  // Whether Device memory is host memory the calling thread may read and write directly.
  virtual bool device_memory_is_host() const = 0;
  // Zero-filled; released with release(p, kind). Throws when the memory is not there.
  virtual void* allocate(size_t bytes, MemoryKind kind) = 0;
  virtual void release(void* p, MemoryKind kind) = 0;
  virtual std::unique_ptr<Stream> create_stream(StreamPriority priority) = 0;
  virtual std::unique_ptr<Event> create_event() = 0;
  // Between any two memories of this backend (and plain host memory).
  virtual void copy(void* dst, const void* src, size_t bytes, Stream& s) = 0;
  virtual void memset(void* dst, int value, size_t bytes, Stream& s) = 0;
  virtual void gemm(const GemmArgs& g, Stream& s) = 0;
};

// One allocation of a backend, zero-filled, released when this goes (the backend outlives it).
class BackendBuffer {
 public:
  BackendBuffer() = default;
  BackendBuffer(Backend& backend, size_t bytes, MemoryKind kind)
      : backend_(&backend), data_(static_cast<uint8_t*>(backend.allocate(bytes, kind))), size_(bytes), kind_(kind) {}
  BackendBuffer(BackendBuffer&& o) noexcept { swap(o); }
  BackendBuffer& operator=(BackendBuffer&& o) noexcept {
    swap(o);
    return *this;
  }
  ~BackendBuffer() {
    if (data_) backend_->release(data_, kind_);
  }
  uint8_t* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  void swap(BackendBuffer& o) {
    std::swap(backend_, o.backend_);
    std::swap(data_, o.data_);
    std::swap(size_, o.size_);
    std::swap(kind_, o.kind_);
  }
  Backend* backend_ = nullptr;
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
  MemoryKind kind_ = MemoryKind::Device;
};

std::unique_ptr<Backend> make_cpu_backend();

// True when this build has the CUDA backend and a device can be opened; otherwise false with
// the reason in *why (no CUDA in this build, no driver, no device).
bool cuda_backend_available(std::string* why = nullptr);
// The CUDA devices this process sees (0 without the backend, a driver or a device).
int cuda_device_count();
// The CUDA backend on `device`; throws with the reason when cuda_backend_available is false.
std::unique_ptr<Backend> make_cuda_backend(int device = 0);

// The free and total memory of CUDA device `device` now (cudaMemGetInfo: what other processes
// and this one hold is already taken), or false with the reason in *why.
struct DeviceMemory {
  uint64_t free = 0, total = 0;
};
bool cuda_device_memory(int device, DeviceMemory* out, std::string* why = nullptr);

}  // namespace asteria
