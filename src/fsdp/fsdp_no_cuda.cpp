// fsdp/shard_vector_ops.hpp's CUDA entry point in a build without the CUDA backend.
#include "core/backend.hpp"
#include "core/error.hpp"
#include "fsdp/shard_vector_ops.hpp"

namespace asteria {

std::unique_ptr<ShardVectorOps> make_cuda_shard_vector_ops() {
  std::string why;
  cuda_backend_available(&why);
  fail("sharded training on the device: ", why);
}

}  // namespace asteria
