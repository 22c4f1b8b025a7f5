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

// Peak FLOP/s of this CPU for MFU: threads x clock x 32 fp32 FLOP/cycle (two 8-wide AVX2 FMA
// units). The clock comes from /proc/cpuinfo; 0 when it cannot be read.
double cpu_peak_flops(int threads);

}  // namespace asteria
