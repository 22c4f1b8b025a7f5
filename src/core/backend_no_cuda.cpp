// The CUDA entry points (core/backend.hpp, fsdp/nccl_communicator.hpp, fsdp/replica_mean.hpp,
// optim/block_backend.hpp) in a build without the CUDA backend (-DASTERIA_CUDA=OFF, or AUTO
// without a toolkit). Not compiled when the backend is built.
#include "core/backend.hpp"
#include "core/error.hpp"
#include "fsdp/nccl_communicator.hpp"
#include "fsdp/replica_mean.hpp"
#include "optim/block_backend.hpp"

namespace asteria {

bool cuda_backend_available(std::string* why) {
  if (why) *why = "this build has no CUDA backend (configure with -DASTERIA_CUDA=ON and a CUDA toolkit)";
  return false;
}

int cuda_device_count() { return 0; }

std::unique_ptr<Backend> make_cuda_backend(int) {
  std::string why;
  cuda_backend_available(&why);
  fail(why);
}

std::unique_ptr<Communicator> make_nccl_communicator(Communicator&, int) {
  std::string why;
  cuda_backend_available(&why);
  fail("NCCL communicator: ", why);
}

const BlockBackend& cuda_block_backend() {
  std::string why;
  cuda_backend_available(&why);
  fail("the second-order optimizer on the device: ", why);
}

void cuda::scale_to_mean(float*, size_t, int) {
  std::string why;
  cuda_backend_available(&why);
  fail("the replicas' mean on the device: ", why);
}

}  // namespace asteria
