// comm/nccl_communicator.hpp and comm/replica_mean.hpp's device entry points in a build without
// the CUDA backend (core/backend_no_cuda.cpp).
#include "comm/nccl_communicator.hpp"
#include "comm/replica_mean.hpp"
#include "core/backend.hpp"
#include "core/error.hpp"

namespace asteria {

std::unique_ptr<Communicator> make_nccl_communicator(Communicator&, int) {
  std::string why;
  cuda_backend_available(&why);
  fail("NCCL communicator: ", why);
}

void cuda::scale_to_mean(float*, size_t, int) {
  std::string why;
  cuda_backend_available(&why);
  fail("the replicas' mean on the device: ", why);
}

}  // namespace asteria
