#include "core/cuda/device_buffer.hpp"

#include "core/cuda/cuda_check.hpp"
#include "core/cuda/cuda_context.hpp"

namespace asteria::cuda {

void* device_allocate_zeroed(size_t bytes) {
  void* p = nullptr;
  const cudaError_t err = cudaMalloc(&p, bytes);
  if (err != cudaSuccess) {
    size_t free_b = 0, total_b = 0;
    cudaGetLastError();   // clears it, so that the next launch check does not report it again
    cudaMemGetInfo(&free_b, &total_b);
    fail("device memory: cannot allocate ", bytes, " bytes (", free_b, " of ", total_b,
         " bytes free on the device): ", cudaGetErrorString(err));
  }
  // Zeroed before it returns: a non-blocking stream (the tiers', the staging lane's, the
  // workers') may fill the memory next, and nothing would order it after a fill still queued.
  ASTERIA_CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, current_stream()));
  ASTERIA_CUDA_CHECK(cudaStreamSynchronize(current_stream()));
  return p;
}

size_t device_memory_free() {
  size_t free_b = 0, total_b = 0;
  ASTERIA_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
  return free_b;
}

void device_release(void* p) {
  if (p) cudaFree(p);   // no throw: called from destructors
}

void copy_to_device(void* dst, const void* src, size_t bytes) {
  if (bytes) ASTERIA_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, current_stream()));
}

void copy_to_host(void* dst, const void* src, size_t bytes) {
  if (!bytes) return;
  ASTERIA_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, current_stream()));
  ASTERIA_CUDA_CHECK(cudaStreamSynchronize(current_stream()));
}

void synchronize_current_stream() { ASTERIA_CUDA_CHECK(cudaStreamSynchronize(current_stream())); }

void device_zero(void* p, size_t bytes) {
  if (bytes) ASTERIA_CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, current_stream()));
}

}  // namespace asteria::cuda
