#pragma once
// An owned, 64-byte aligned array. Allocated once (touching fresh memory is slow on the target
// machines), never resized in a hot path. Zero-filled on construction so that every page is
// touched up front rather than during the first training step.
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <new>
#include <utility>

namespace asteria {

template <class T>
class Buffer {
 public:
  Buffer() = default;
  // alignment: a power of two >= 64 (4096 for memory used in direct I/O).
  explicit Buffer(size_t n, size_t alignment = 64) { resize(n, alignment); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  Buffer(Buffer&& o) noexcept { swap(o); }
  Buffer& operator=(Buffer&& o) noexcept {
    swap(o);
    return *this;
  }
  ~Buffer() { std::free(data_); }

  void resize(size_t n, size_t alignment = 64) {
    std::free(data_);
    data_ = nullptr;
    size_ = n;
    if (n == 0) return;
    size_t bytes = (n * sizeof(T) + alignment - 1) / alignment * alignment;
    data_ = static_cast<T*>(std::aligned_alloc(alignment, bytes));
    if (!data_) throw std::bad_alloc();
    std::memset(static_cast<void*>(data_), 0, bytes);
  }
  void zero() {
    if (size_) std::memset(static_cast<void*>(data_), 0, size_ * sizeof(T));
  }
  T* data() { return data_; }
  const T* data() const { return data_; }
  size_t size() const { return size_; }
  T& operator[](size_t i) { return data_[i]; }
  const T& operator[](size_t i) const { return data_[i]; }

 private:
  void swap(Buffer& o) {
    std::swap(data_, o.data_);
    std::swap(size_, o.size_);
  }
  T* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace asteria
