// bf16 storage on the CPU (contract: ops/bf16_storage.hpp), with core/bf16.hpp's rounding.
#include "model/ops/bf16_storage.hpp"

#include "core/bf16.hpp"
#include "model/ops/parallel.hpp"

namespace asteria::ops {

void pack_bf16(uint16_t* dst, const float* src, size_t n) {
#pragma omp parallel for simd schedule(static) if (worth_parallel(n))
  for (size_t i = 0; i < n; i++) dst[i] = to_bf16(src[i]).bits;
}

void unpack_bf16(float* dst, const uint16_t* src, size_t n) {
#pragma omp parallel for simd schedule(static) if (worth_parallel(n))
  for (size_t i = 0; i < n; i++) dst[i] = to_float(bf16{src[i]});
}

void round_to_bf16(float* dst, const float* src, size_t n) {
#pragma omp parallel for simd schedule(static) if (worth_parallel(n))
  for (size_t i = 0; i < n; i++) dst[i] = to_float(to_bf16(src[i]));
}

}  // namespace asteria::ops
