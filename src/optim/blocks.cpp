#include "optim/blocks.hpp"

namespace asteria {

std::vector<std::pair<int64_t, int64_t>> split_dimension(int64_t n, int64_t max_dim) {
  const int64_t chunks = (n + max_dim - 1) / max_dim;
  std::vector<std::pair<int64_t, int64_t>> out;
  int64_t begin = 0;
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t size = n / chunks + (c < n % chunks ? 1 : 0);
    out.emplace_back(begin, size);
    begin += size;
  }
  return out;
}

bool is_preconditioned(const ParamEntry& e, bool precondition_embeddings) {
  if (e.shape.size() != 2) return false;
  return e.cls == ParamClass::Matrix || (e.cls == ParamClass::Embedding && precondition_embeddings);
}

std::vector<MatrixBlock> layer_blocks(int layer, const ParamTable& table, int64_t max_dim,
                                      bool precondition_embeddings) {
  std::vector<MatrixBlock> blocks;
  for (int i = 0; i < static_cast<int>(table.entries.size()); ++i) {
    const ParamEntry& e = table.entries[i];
    if (!is_preconditioned(e, precondition_embeddings)) continue;
    int index = 0;
    for (auto [r0, rn] : split_dimension(e.shape[0], max_dim))
      for (auto [c0, cn] : split_dimension(e.shape[1], max_dim)) {
        MatrixBlock b;
        b.layer = layer;
        b.entry = i;
        b.index = index++;
        b.row0 = e.row_offset + r0;   // in the whole tensor: names and checkpoints
        b.rows = rn;
        b.col0 = c0;
        b.cols = cn;
        b.ld = e.shape[1];
        b.offset = e.offset + static_cast<size_t>(r0 * e.shape[1] + c0);
        b.name = e.name + "[" + std::to_string(b.index) + "]: rows " + std::to_string(b.row0) + "-" +
                 std::to_string(b.row0 + rn - 1) + ", cols " + std::to_string(c0) + "-" +
                 std::to_string(c0 + cn - 1);
        blocks.push_back(std::move(b));
      }
  }
  return blocks;
}

int whole_block_index(const std::vector<MatrixBlock>& whole, const ParamTable& whole_table, const MatrixBlock& b,
                      const std::string& entry_name) {
  for (size_t i = 0; i < whole.size(); ++i)
    if (whole[i].row0 == b.row0 && whole[i].col0 == b.col0 && whole_table.entries[whole[i].entry].name == entry_name)
      return static_cast<int>(i);
  return -1;
}

}  // namespace asteria
