#pragma once
// The model run for generation: token by token over a key/value cache, no gradients, no kept
// activations (Model, model.hpp, is the training forward/backward over whole sequences).
//
// Contract:
//   Decoder d(cfg, context)            parameters, the cache for `context` positions and buffers
//                                      for up to max_rows new tokens per pass, all allocated here
//   d.load(source)                     every layer's parameters (model/param_source.hpp)
//   d.forward(tokens, n)               runs n tokens at positions position() .. position()+n-1
//                                      (in passes of max_rows), appends their keys and values to
//                                      the cache and returns the logits [E] of the last one
//   d.reset()                          back to position 0 (the cache is overwritten from there)
// The layers are the training model's (block.hpp's equations, the head's E-wide logits) on the
// same ops, so a continuation over the cache is the argmax of the training forward over the whole
// sequence (up to fp32 rounding). Ops: CpuOps (host memory) or CudaOps (parameters and cache in
// device memory, in builds with ASTERIA_HAVE_CUDA); logits come back to the host either way.
#include <cstdint>
#include <memory>
#include <vector>

#include "model/model_config.hpp"
#include "model/param_source.hpp"

namespace asteria {

struct CpuOps;
struct CudaOps;

template <class T, class Ops = CpuOps>
class Decoder {
 public:
  Decoder(const ModelConfig& cfg, int context, int max_rows = 128);
  ~Decoder();
  Decoder(const Decoder&) = delete;
  Decoder& operator=(const Decoder&) = delete;

  const ModelConfig& config() const;
  int context() const;
  int position() const;
  // Bytes allocated for parameters, cache and buffers (for reports).
  size_t bytes() const;

  void load(const ParamSource& source);
  void reset();
  // n >= 1 and position() + n <= context(); throws asteria::Error naming the limit otherwise.
  const std::vector<T>& forward(const int32_t* tokens, int n);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

extern template class Decoder<float>;
#ifdef ASTERIA_HAVE_CUDA
extern template class Decoder<float, CudaOps>;
#endif

}  // namespace asteria
