#pragma once
// RoPE's cos / sin tables [positions, hd/2] in an op set's memory, made once on the host
// (ops::rope_tables, in double) and moved over: what a model and a decoder rotate with.
#include <type_traits>

#include "core/buffer.hpp"
#include "model/model_config.hpp"
#include "model/ops/rope.hpp"

namespace asteria {

template <class Ops, class Array>
void make_rope_tables(Array& cos, Array& sin, int positions, const ModelConfig& cfg) {
  using T = typename std::remove_pointer_t<decltype(cos.data())>;
  const size_t n = static_cast<size_t>(positions) * (cfg.head_dim() / 2);
  cos.resize(n);
  sin.resize(n);
  Buffer<T> cos_h(n), sin_h(n);
  ops::rope_tables(cos_h.data(), sin_h.data(), positions, cfg.head_dim(), cfg.rope_theta);
  Ops::to_device(cos.data(), cos_h.data(), n);
  Ops::to_device(sin.data(), sin_h.data(), n);
}

}  // namespace asteria
