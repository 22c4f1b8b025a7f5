#pragma once
// Parameter initialization: a pure function of (seed, tensor name, element index), so it gives
// the same bits on every machine and with any number of threads. Uses its own generator
// (splitmix64 + Box-Muller in double), never std:: distributions (implementation-defined).
//
// Schemes (all normals truncated at 3 sigma by resampling; norm weights are 1):
//   normal   : every matrix and embedding ~ N(0, init_std)
//   mitchell : (OLMo-1) std = 1/sqrt(fan_in) for att_qkv, mlp_up, lm_head;
//              att_out: 1/sqrt(2 * C * (i + 1)), mlp_down: 1/sqrt(2 * F * (i + 1)) in block i
//              (deeper residual writers start smaller); wte: 1/sqrt(C), as OLMo-1 does.
#include <cstddef>
#include <cstdint>
#include <string>

#include "model/model_config.hpp"
#include "model/param_table.hpp"

namespace asteria {

// Standard deviation the scheme gives a tensor; 0 for norm weights (which are set to 1).
// block is the block index for "blocks.{i}.*" tensors, -1 otherwise.
double init_std_for(const ModelConfig& cfg, const ParamEntry& entry, int block);

// x[i] = std * z_i, z_i ~ N(0, 1) truncated to [-3, 3]; z_i depends only on (seed, stream, i).
template <class T>
void fill_truncated_normal(T* x, size_t n, double std, uint64_t seed, uint64_t stream);

// A stable 64-bit hash of a tensor name (FNV-1a), used as the stream of its values.
uint64_t name_stream(const std::string& name);

}  // namespace asteria
