#pragma once
// Parameters of one layer live in one flat buffer described by a table of named tensors
// (llm.c style): a layer is one contiguous range to shard, gather, save and optimize.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace asteria {

// What a tensor is, for the optimizer (weight-decay exclusion, preconditioning) and reports.
enum class ParamClass { Embedding, Matrix, Norm };

struct ParamEntry {
  std::string name;             // full name, e.g. "blocks.0.att_qkv"
  std::vector<int64_t> shape;   // [rows, cols] for matrices (out x in), [n] for vectors
  size_t offset = 0;            // in elements from the start of the layer's buffer
  size_t numel = 0;
  ParamClass cls = ParamClass::Matrix;
  int64_t row_offset = 0;       // a shard's row-block of a tensor: its first row in the tensor,
  int64_t tensor_rows = 0;      // and the tensor's rows (0: the entry is the whole tensor)
  // A fused tensor's stacked matrices of equal rows (att_qkv: q, k, v; mlp_up: up, gate): what
  // another implementation has as separate weights, for optimizers that treat each alone (Muon).
  int parts = 1;
};

struct ParamTable {
  std::vector<ParamEntry> entries;
  size_t numel = 0;

  // Appends a tensor at the end of the layer's buffer and returns its offset.
  size_t add(std::string name, std::vector<int64_t> shape, ParamClass cls, int parts = 1) {
    size_t n = 1;
    for (auto s : shape) n *= static_cast<size_t>(s);
    entries.push_back({std::move(name), std::move(shape), numel, n, cls});
    entries.back().parts = parts;
    numel += n;
    return entries.back().offset;
  }
  const ParamEntry* find(const std::string& name) const {
    for (auto& e : entries)
      if (e.name == name) return &e;
    return nullptr;
  }
};

}  // namespace asteria
