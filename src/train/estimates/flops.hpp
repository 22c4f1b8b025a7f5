#pragma once
// FLOP and memory accounting of a model config (reported by --dry-run and the metrics).
#include <cstddef>
#include <cstdint>
#include <string>

#include "model/model_config.hpp"

namespace asteria {

// Training FLOPs per token: 6 x (parameters outside the input embedding) + 12 x layers x
// d_model x seq_len (attention scores and values, forward + backward). With tied embeddings the
// LM head's matmul is counted once (it uses the embedding matrix).
double training_flops_per_token(const ModelConfig& m);
const char* training_flops_formula();

struct ParamCounts {
  int64_t total = 0;
  int64_t embedding = 0;   // wte (+ lm_head when untied)
  int64_t matrices = 0;    // block weight matrices
  int64_t norms = 0;       // 1-D weights
};
ParamCounts count_params(const ModelConfig& m);

// fp32 FLOP per cycle and core of the CPU's FMA units: 64 with full-width AVX-512 (two 16-wide
// FMA units: Intel's AVX-512 cores, AMD Zen 5), else 32 (two 8-wide units: AVX2, and Zen 4,
// which runs AVX-512 as two 256-bit halves). bench/bench_fma_peak measures it.
int cpu_fma_flops_per_cycle();
// Peak FLOP/s of this CPU for MFU: threads x clock x cpu_fma_flops_per_cycle(). The clock comes
// from /proc/cpuinfo; 0 when it cannot be read.
double cpu_peak_flops(int threads);

}  // namespace asteria
