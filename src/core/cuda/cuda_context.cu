#include "core/cuda/cuda_context.hpp"

#include "core/cuda/cuda_check.hpp"

namespace asteria::cuda {

namespace {

thread_local cudaStream_t t_stream = nullptr;

struct Workspace {
  void* data = nullptr;
  size_t bytes = 0;
  ~Workspace() {
    if (data) cudaFree(data);
  }
};
thread_local Workspace t_workspace;

struct Cublas {
  cublasHandle_t handle = nullptr;
  ~Cublas() {
    if (handle) cublasDestroy(handle);
  }
};
thread_local Cublas t_cublas;

}  // namespace

cudaStream_t current_stream() { return t_stream; }

StreamScope::StreamScope(cudaStream_t s) : previous_(t_stream) { t_stream = s; }
StreamScope::~StreamScope() { t_stream = previous_; }

cublasHandle_t thread_cublas() {
  if (!t_cublas.handle) ASTERIA_CUBLAS_CHECK(cublasCreate(&t_cublas.handle));
  ASTERIA_CUBLAS_CHECK(cublasSetStream(t_cublas.handle, t_stream));
  return t_cublas.handle;
}

void* thread_workspace(size_t bytes) {
  Workspace& w = t_workspace;
  if (bytes > w.bytes) {
    ASTERIA_CUDA_CHECK(cudaStreamSynchronize(t_stream));
    if (w.data) ASTERIA_CUDA_CHECK(cudaFree(w.data));
    w.data = nullptr;
    w.bytes = 0;
    ASTERIA_CUDA_CHECK(cudaMalloc(&w.data, bytes));
    w.bytes = bytes;
  }
  return w.data;
}

std::string current_device_pci_bus_id() {
  int device = 0;
  ASTERIA_CUDA_CHECK(cudaGetDevice(&device));
  char id[32] = {};
  ASTERIA_CUDA_CHECK(cudaDeviceGetPCIBusId(id, sizeof id, device));
  return id;
}

}  // namespace asteria::cuda
