#pragma once
// The linear layers' precision as the layers receive it (runtime.precision; ops/linear.hpp):
// whether the GEMMs take bf16 operands, and the layer's bf16 copy of its weights when the model
// keeps one (model.hpp).
#include <cstddef>
#include <cstdint>

namespace asteria {

// A layer's bf16 copy of its parameters (runtime.precision bf16: made once per change of the
// parameters, i.e. once per step after the optimizer, instead of each GEMM rounding its weight;
// model.hpp): `copy` holds the bf16 values of params[0, n), in the op set's memory.
struct Bf16Weights {
  const float* params = nullptr;
  const uint16_t* copy = nullptr;
  size_t n = 0;
  // The copy of the weight starting at w, or null when w is not in these parameters (the GEMM
  // then rounds it).
  const uint16_t* of(const void* w) const {
    const auto at = reinterpret_cast<uintptr_t>(w), begin = reinterpret_cast<uintptr_t>(params);
    if (!copy || at < begin || at >= begin + n * sizeof(float)) return nullptr;
    return copy + (at - begin) / sizeof(float);
  }
};

// The linear layers' precision: bf16 operands (runtime.precision bf16; T float), with the
// weights' copy when there is one; else T's (T double, the finite-difference checks, always
// computes in double).
struct GemmPrecision {
  bool bf16 = false;
  Bf16Weights weights;
};

}  // namespace asteria
