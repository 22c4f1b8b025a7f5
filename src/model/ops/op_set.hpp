#pragma once
// The model's ops of one backend as a type, so that the layers (block.cpp, head.cpp) and the
// model (model.cpp) are written once and instantiated per backend:
//   CpuOps   the ops of ops/cpu/ on host memory (Buffer<T>), float and double
//   CudaOps  the ops of ops/cuda/ on device memory (cuda::DeviceBuffer<T>), float; declared in
//            every build, usable only where ASTERIA_HAVE_CUDA is defined (its ops are linked
//            from the asteria_cuda library)
// Each op forwards to ops::<op> or ops::cuda::<op>, which have the same signature (one header
// per op). Besides the ops, an op set names its memory (Array<T>) and the moves across the
// host boundary: to_device / to_host (plain copies on the CPU) and zero.
// runtime.precision is a property of the run, not of the op set: both backends have the bf16
// ops (linear_*_bf16, the bf16 storage ops), and linear_forward_at / linear_backward_at below
// pick the linear layer's variant.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

#include "core/buffer.hpp"
#include "model/ops/gemm_precision.hpp"
#include "core/cuda/device_buffer.hpp"
#include "model/ops/attention.hpp"
#include "model/ops/attention_cached.hpp"
#include "model/ops/attention_tiled.hpp"
#include "model/ops/bf16_storage.hpp"
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
  X(attention_tiled_backward) X(attention_cached_forward) X(swiglu_forward) X(swiglu_backward)                    \
  X(embedding_forward) X(embedding_backward) X(cross_entropy_fused) X(copy) X(copy_columns)   \
  X(linear_forward_bf16) X(linear_backward_bf16) X(pack_bf16) X(unpack_bf16) X(round_to_bf16)

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

template <class Ops, class T>
void linear_forward_at(const GemmPrecision& p, T* out, const T* inp, const T* weight, int N, int IC, int OC,
                       bool accumulate) {
  if constexpr (std::is_same_v<T, float>)
    if (p.bf16) return Ops::linear_forward_bf16(out, inp, weight, p.weights.of(weight), N, IC, OC, accumulate);
  Ops::linear_forward(out, inp, weight, N, IC, OC, accumulate);
}

template <class Ops, class T>
void linear_backward_at(const GemmPrecision& p, T* dinp, T* dweight, const T* dout, const T* inp, const T* weight,
                        int N, int IC, int OC, T scale, bool accumulate_dinp) {
  if constexpr (std::is_same_v<T, float>)
    if (p.bf16)
      return Ops::linear_backward_bf16(dinp, dweight, dout, inp, weight, p.weights.of(weight), N, IC, OC, scale,
                                       accumulate_dinp);
  Ops::linear_backward(dinp, dweight, dout, inp, weight, N, IC, OC, scale, accumulate_dinp);
}

#undef ASTERIA_FORWARD_CUDA_OP
#undef ASTERIA_FORWARD_CPU_OP
#undef ASTERIA_FORWARD_OP_TO
#undef ASTERIA_MODEL_OPS

}  // namespace asteria
