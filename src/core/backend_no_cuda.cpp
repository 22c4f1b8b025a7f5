// core/backend.hpp's CUDA entry points in a build without the CUDA backend (-DASTERIA_CUDA=OFF,
// or AUTO without a toolkit). Each folder with CUDA code has its own *_no_cuda.cpp; none is
// compiled when the backend is built.
#include "core/backend.hpp"
#include "core/error.hpp"

namespace asteria {

bool cuda_backend_available(std::string* why) {
  if (why) *why = "this build has no CUDA backend (configure with -DASTERIA_CUDA=ON and a CUDA toolkit)";
  return false;
}

int cuda_device_count() { return 0; }

bool cuda_device_memory(int, DeviceMemory*, std::string* why) { return cuda_backend_available(why); }

std::unique_ptr<Backend> make_cuda_backend(int) {
  std::string why;
  cuda_backend_available(&why);
  fail(why);
}

}  // namespace asteria
