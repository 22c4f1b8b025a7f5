#pragma once
// Preconditioner blocks for the schedule and placement tests.
#include <vector>

#include "optim/blocks.hpp"

namespace asteria::testing {

inline MatrixBlock block(int64_t rows, int64_t cols) {
  MatrixBlock b;
  b.rows = rows;
  b.cols = cols;
  return b;
}

// bench-small's preconditioned blocks (max_preconditioner_dim 1024): per layer the fused QKV
// 768 x 256, the attention output 256 x 256, the SwiGLU input 2048 x 256 as two 1024 x 256
// blocks, the MLP output 256 x 1024.
inline std::vector<std::vector<MatrixBlock>> bench_small_blocks(int layers) {
  std::vector<std::vector<MatrixBlock>> blocks;
  for (int l = 0; l < layers; ++l)
    blocks.push_back({block(768, 256), block(256, 256), block(1024, 256), block(1024, 256), block(256, 1024)});
  return blocks;
}

}  // namespace asteria::testing
