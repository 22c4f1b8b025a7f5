#pragma once
// Device memory for the model's buffers on the CUDA backend, with Buffer<T>'s interface (an
// owned, zero-filled array allocated once), and the host <-> device transfers the model needs
// at its edges (initial values, token ids, checkpoints). Host-compilable: no CUDA header, so
// code shared by both backends (model.cpp) includes it without nvcc.
#include <cstddef>
#include <utility>

namespace asteria::cuda {

void* device_allocate_zeroed(size_t bytes);   // cudaMalloc + memset; throws when out of memory
void device_release(void* p);
// The current device's free bytes (cudaMemGetInfo).
size_t device_memory_free();
// On the calling thread's current stream. to_device returns once `src` may be reused (pageable
// memory is staged by the runtime); to_host returns once `dst` holds the values.
void copy_to_device(void* dst, const void* src, size_t bytes);
void copy_to_host(void* dst, const void* src, size_t bytes);
void device_zero(void* p, size_t bytes);
// Returns when the current stream has run everything queued on it.
void synchronize_current_stream();

template <class T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t n) { resize(n); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept { swap(o); }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    swap(o);
    return *this;
  }
  ~DeviceBuffer() { device_release(data_); }

  void resize(size_t n) {
    device_release(data_);
    data_ = nullptr;
    size_ = n;
    if (n) data_ = static_cast<T*>(device_allocate_zeroed(n * sizeof(T)));
  }
  T* data() { return data_; }
  const T* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  void swap(DeviceBuffer& o) {
    std::swap(data_, o.data_);
    std::swap(size_, o.size_);
  }
  T* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace asteria::cuda
