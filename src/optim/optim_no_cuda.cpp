// optim/block_backend.hpp's device backend in a build without the CUDA backend
// (core/backend_no_cuda.cpp).
#include "core/backend.hpp"
#include "core/error.hpp"
#include "optim/block_backend.hpp"

namespace asteria {

const BlockBackend& cuda_block_backend() {
  std::string why;
  cuda_backend_available(&why);
  fail("the second-order optimizer on the device: ", why);
}

}  // namespace asteria
