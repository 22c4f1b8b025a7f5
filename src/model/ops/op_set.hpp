#pragma once
// The model's ops of one backend as a type, so that the layers (block.cpp, head.cpp) and the
// model (model.cpp) are written once and instantiated per backend:
//   CpuOps   the ops of ops/cpu/ on host memory (Buffer<T>), float and double
//   CudaOps  the ops of ops/cuda/ on device memory (cuda::DeviceBuffer<T>), float; declared in
//            every build, usable only where ASTERIA_HAVE_CUDA is defined (its ops are linked
//            from the asteria_cuda library)
//   CudaBf16Ops  CudaOps with bf16 GEMM operands in the linear layers (runtime.precision bf16)
// Each op forwards to ops::<op> or ops::cuda::<op>, which have the same signature (one header
// per op). Besides the ops, an op set names its memory (Array<T>) and the moves across the
// host boundary: to_device / to_host (plain copies on the CPU) and zero.
#include <cstddef>
#include <cstring>
#include <utility>

#include "core/buffer.hpp"
#include "core/cuda/device_buffer.hpp"
#include "model/ops/attention.hpp"
#include "model/ops/attention_tiled.hpp"
#include "model/ops/copy.hpp"
#include "model/ops/cross_entropy.hpp"
#include "model/ops/embedding.hpp"
#include "model/ops/layernorm.hpp"
#include "model/ops/linear.hpp"
#include "model/ops/rmsnorm.hpp"
#include "model/ops/rope.hpp"
#include "model/ops/swiglu.hpp"

namespace asteria {

#define ASTERIA_MODEL_OPS(X)                                                          \
  X(linear_forward) X(linear_backward) X(rmsnorm_forward) X(rmsnorm_backward)         \
  X(layernorm_forward) X(layernorm_backward) X(rope_forward) X(rope_backward)         \
  X(attention_forward) X(attention_backward) X(attention_tiled_forward)               \
  X(attention_tiled_backward) X(swiglu_forward) X(swiglu_backward)                    \
  X(embedding_forward) X(embedding_backward) X(cross_entropy_fused) X(copy) X(copy_columns)

#define ASTERIA_FORWARD_OP_TO(ns, op) \
  template <class... A>               \
  static decltype(auto) op(A&&... a) { return ns::op(std::forward<A>(a)...); }
#define ASTERIA_FORWARD_CPU_OP(op) ASTERIA_FORWARD_OP_TO(::asteria::ops, op)
#define ASTERIA_FORWARD_CUDA_OP(op) ASTERIA_FORWARD_OP_TO(::asteria::ops::cuda, op)

struct CpuOps {
  static constexpr bool kHostMemory = true;
  template <class T>
  using Array = Buffer<T>;
  ASTERIA_MODEL_OPS(ASTERIA_FORWARD_CPU_OP)
  template <class T>
  static void to_device(T* dst, const T* src, size_t n) { std::memcpy(dst, src, n * sizeof(T)); }
  template <class T>
  static void to_host(T* dst, const T* src, size_t n) { std::memcpy(dst, src, n * sizeof(T)); }
  template <class T>
  static void zero(T* p, size_t n) { std::memset(static_cast<void*>(p), 0, n * sizeof(T)); }
};

struct CudaOps {
  static constexpr bool kHostMemory = false;
  template <class T>
  using Array = cuda::DeviceBuffer<T>;
  ASTERIA_MODEL_OPS(ASTERIA_FORWARD_CUDA_OP)
  template <class T>
  static void to_device(T* dst, const T* src, size_t n) { cuda::copy_to_device(dst, src, n * sizeof(T)); }
  template <class T>
  static void to_host(T* dst, const T* src, size_t n) { cuda::copy_to_host(dst, src, n * sizeof(T)); }
  template <class T>
  static void zero(T* p, size_t n) { cuda::device_zero(p, n * sizeof(T)); }
};

// CudaOps with the linear layers' GEMMs (the LM head's too) on bf16 operands with fp32
// accumulation (ops::cuda::linear_*_bf16); everything else, and all stored values, fp32.
struct CudaBf16Ops : CudaOps {
  ASTERIA_FORWARD_OP_TO(::asteria::ops::cuda, linear_forward_bf16)
  ASTERIA_FORWARD_OP_TO(::asteria::ops::cuda, linear_backward_bf16)
  template <class... A>
  static void linear_forward(A&&... a) { linear_forward_bf16(std::forward<A>(a)...); }
  template <class... A>
  static void linear_backward(A&&... a) { linear_backward_bf16(std::forward<A>(a)...); }
};

#undef ASTERIA_FORWARD_CUDA_OP
#undef ASTERIA_FORWARD_CPU_OP
#undef ASTERIA_FORWARD_OP_TO
#undef ASTERIA_MODEL_OPS

}  // namespace asteria
