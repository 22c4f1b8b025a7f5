#pragma once
// Error checks of the CUDA runtime and libraries: a failed call throws asteria::Error naming the
// call, its file and line, and the library's own message.
#include <cublasLt.h>
#include <cuda_runtime.h>

#include "core/error.hpp"

#define ASTERIA_CUDA_CHECK(call)                                                                     \
  do {                                                                                               \
    const cudaError_t asteria_err_ = (call);                                                         \
    if (asteria_err_ != cudaSuccess)                                                                 \
      ::asteria::fail(#call, " failed at ", __FILE__, ":", __LINE__, ": ", cudaGetErrorString(asteria_err_)); \
  } while (0)

#define ASTERIA_CUBLAS_CHECK(call)                                                                   \
  do {                                                                                               \
    const cublasStatus_t asteria_st_ = (call);                                                       \
    if (asteria_st_ != CUBLAS_STATUS_SUCCESS)                                                        \
      ::asteria::fail(#call, " failed at ", __FILE__, ":", __LINE__, ": ", cublasGetStatusString(asteria_st_)); \
  } while (0)

// After a kernel launch: a bad launch configuration is reported here, not at the next sync.
#define ASTERIA_CUDA_LAUNCH_CHECK() ASTERIA_CUDA_CHECK(cudaGetLastError())
