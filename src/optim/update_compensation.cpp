#include "optim/update_compensation.hpp"

#include <algorithm>

namespace asteria {

std::vector<CompensationBand> compensation_bands(const ParamTable& table, const std::vector<MatrixBlock>& blocks) {
  if (blocks.empty()) return {{0, table.numel, BlockRange{}, -1, 0, 0}};
  std::vector<CompensationBand> bands;
  size_t b = 0;   // blocks are in table order, each entry's row-major
  for (int i = 0; i < static_cast<int>(table.entries.size()); ++i) {
    const ParamEntry& e = table.entries[i];
    if (e.numel == 0) continue;
    if (b == blocks.size() || blocks[b].entry != i) {   // no block: the whole entry, every part's
      bands.push_back({e.offset, e.numel, BlockRange{}, i, 0, e.shape.empty() ? 0 : e.shape[0]});
      continue;
    }
    const int64_t cols = e.shape[1];
    while (b < blocks.size() && blocks[b].entry == i) {
      const size_t first = b;
      const int64_t row0 = blocks[b].row0 - e.row_offset, rows = blocks[b].rows;
      while (b < blocks.size() && blocks[b].entry == i && blocks[b].row0 == blocks[first].row0) ++b;
      bands.push_back({e.offset + static_cast<size_t>(row0 * cols), static_cast<size_t>(rows * cols),
                       BlockRange{static_cast<int>(first), static_cast<int>(b)}, i, row0, rows});
    }
  }
  return bands;
}

namespace {

std::vector<StateSpec> band_specs(int layer, const ParamTable& table, const std::vector<CompensationBand>& bands) {
  const std::string base = "layer " + std::to_string(layer) + " / update compensation";
  std::vector<StateSpec> specs;
  for (const CompensationBand& band : bands) {
    std::string name = base;
    if (band.entry >= 0) {
      const ParamEntry& e = table.entries[band.entry];
      name += " of " + e.name;
      if (band.rows > 0 && band.count < e.numel)
        name += " rows " + std::to_string(e.row_offset + band.row0) + "-" + std::to_string(e.row_offset + band.row0 + band.rows - 1);
    }
    specs.push_back({std::move(name), band.count, StateClass::Hot, {}, band.blocks});
  }
  return specs;
}

}  // namespace

std::vector<StateSpec> compensation_state_specs(int layer, const ParamTable& table,
                                                const std::vector<MatrixBlock>& blocks) {
  return band_specs(layer, table, compensation_bands(table, blocks));
}

UpdateCompensation::UpdateCompensation(bool enabled, const std::vector<ParamTable>& layers, bool own_memory,
                                       const std::vector<std::vector<MatrixBlock>>& blocks) {
  if (!enabled) return;
  tables_ = layers;
  const int L = static_cast<int>(layers.size());
  bands_.resize(L);
  states_.resize(L);
  for (int l = 0; l < L; ++l) {
    if (layers[l].numel == 0) continue;   // a layer without parameters
    const std::vector<MatrixBlock> none;
    const std::vector<MatrixBlock>& layer_blocks = blocks.empty() ? none : blocks[l];
    bands_[l] = compensation_bands(layers[l], layer_blocks);
    states_[l].reserve(bands_[l].size());
    for (StateSpec& spec : band_specs(l, layers[l], bands_[l])) states_[l].emplace_back(std::move(spec));
  }
  if (!own_memory) return;
  own_memory_.resize(layers.size());
  for (int l = 0; l < L; ++l) own_memory_[l].bind(layer_states(l));
}

float* UpdateCompensation::at(int l, size_t offset) {
  if (!enabled()) return nullptr;
  const std::vector<CompensationBand>& bands = bands_[l];
  // The last band starting at or before `offset`.
  const auto it = std::upper_bound(bands.begin(), bands.end(), offset,
                                   [](size_t o, const CompensationBand& b) { return o < b.offset; });
  ASTERIA_ASSERT(it != bands.begin(), "layer ", l, ": no compensation band holds element ", offset);
  const size_t k = static_cast<size_t>(it - bands.begin()) - 1;
  ASTERIA_ASSERT(offset < bands[k].offset + bands[k].count, "layer ", l, ": no compensation band holds element ", offset);
  return states_[l][k].data() + (offset - bands[k].offset);
}

std::vector<StateTensor*> UpdateCompensation::layer_states(int l) {
  std::vector<StateTensor*> out;
  if (enabled())
    for (StateTensor& s : states_[l]) out.push_back(&s);
  return out;
}

std::vector<std::vector<StatePiece>> UpdateCompensation::state_pieces(int l) const {
  if (!enabled()) return {};
  std::vector<std::vector<StatePiece>> out;
  for (const CompensationBand& band : bands_[l]) {
    std::vector<StatePiece> pieces;
    for (int i = 0; i < static_cast<int>(tables_[l].entries.size()); ++i) {
      const ParamEntry& e = tables_[l].entries[i];
      if (e.numel == 0 || (band.entry >= 0 && band.entry != i)) continue;
      const std::string name = state_piece_name("optim/compensation", e.name);
      if (band.entry < 0 || band.count == e.numel) {   // whole entries: as their parameters
        pieces.push_back({name, e.shape, e.offset - band.offset, {}, e.row_offset, e.tensor_rows});
      } else {   // some of its rows: a row-block of the tensor
        pieces.push_back({name, {band.rows, e.shape[1]}, 0, {}, e.row_offset + band.row0,
                          e.tensor_rows > 0 ? e.tensor_rows : e.shape[0]});
      }
    }
    out.push_back(std::move(pieces));
  }
  return out;
}

size_t UpdateCompensation::state_bytes() const {
  size_t n = 0;
  for (const auto& layer : states_)
    for (const StateTensor& s : layer) n += s.spec().bytes();
  return n;
}

}  // namespace asteria
