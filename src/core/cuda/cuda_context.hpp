#pragma once
// What the CUDA ops share on the calling thread: the stream they run on (set with StreamScope
// by whoever runs a lane: the trainer's compute lane, a test), and the device workspace ops
// with scratch needs use (grown on demand and kept: allocating per step is slow).
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <string>

namespace asteria::cuda {

// The calling thread's current stream (the legacy default stream when none was set).
cudaStream_t current_stream();

// Sets the calling thread's current stream for its lifetime, restoring the previous one.
class StreamScope {
 public:
  explicit StreamScope(cudaStream_t s);
  ~StreamScope();
  StreamScope(const StreamScope&) = delete;
  StreamScope& operator=(const StreamScope&) = delete;

 private:
  cudaStream_t previous_;
};

// The calling thread's cuBLAS handle (created on first use), set to its current stream: for the
// products cuBLASLt does not cover (fp64, SYRK). Default math: no TF32.
cublasHandle_t thread_cublas();

// A device buffer of at least `bytes` for the calling thread's ops, valid until the next call
// on this thread. Growing it synchronizes the current stream first (the old buffer may be in use).
void* thread_workspace(size_t bytes);

// The PCI bus id of the calling thread's current device ("0000:19:00.0"): how NVML finds the
// same GPU (nvml_energy.hpp).
std::string current_device_pci_bus_id();

}  // namespace asteria::cuda
