#pragma once
// Preconditioner blocks. Every 2-D parameter (an entry of a layer's ParamTable, shape
// [rows, cols], row-major) is cut into blocks of at most max_dim rows and max_dim cols; each
// block gets its own Kronecker factors L (rows x rows) and R (cols x cols). 1-D parameters
// (norm weights) are not blocks: the second-order optimizers update them with AdamW.
#include <cstdint>
#include <string>
#include <vector>

#include "model/param_table.hpp"

namespace asteria {

struct MatrixBlock {
  int layer = 0;
  int entry = 0;        // index in the layer's ParamTable
  int index = 0;        // block number within the entry
  int64_t row0 = 0, rows = 0;  // row0: in the whole tensor (entry.row_offset + the block's row)
  int64_t col0 = 0, cols = 0;
  int64_t ld = 0;       // row stride of the whole matrix
  size_t offset = 0;    // element offset of (row0, col0) in the layer's flat buffer
  std::string name;     // "blocks.0.att_qkv[1]: rows 256-511, cols 0-255"
};

// Splits a dimension into ceil(n / max_dim) chunks of near-equal size (no sliver blocks).
std::vector<std::pair<int64_t, int64_t>> split_dimension(int64_t n, int64_t max_dim);

// All blocks of a layer, in table order. Entries that are 1-D, and embeddings when
// precondition_embeddings is false, are skipped.
std::vector<MatrixBlock> layer_blocks(int layer, const ParamTable& table, int64_t max_dim,
                                      bool precondition_embeddings);

// The index of block b (of a table whose entries may be a shard's row-blocks: entry_name is
// b's tensor) among `whole`, the blocks of the whole layer's table `whole_table`: the same
// tensor, first row and first column. -1 when there is none.
int whole_block_index(const std::vector<MatrixBlock>& whole, const ParamTable& whole_table, const MatrixBlock& b,
                      const std::string& entry_name);

// Whether an entry is preconditioned (a block owner) or updated by AdamW.
bool is_preconditioned(const ParamEntry& e, bool precondition_embeddings);

}  // namespace asteria
