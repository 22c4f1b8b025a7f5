#include "optim/update_compensation.hpp"

namespace asteria {

StateSpec compensation_state_spec(int layer, const ParamTable& table) {
  return {"layer " + std::to_string(layer) + " / update compensation", table.numel, StateClass::Hot, {}};
}

UpdateCompensation::UpdateCompensation(bool enabled, const std::vector<ParamTable>& layers, bool own_memory) {
  if (!enabled) return;
  tables_ = layers;
  states_.reserve(layers.size());
  for (int l = 0; l < static_cast<int>(layers.size()); ++l) states_.emplace_back(compensation_state_spec(l, layers[l]));
  if (!own_memory) return;
  own_memory_.resize(layers.size());
  for (int l = 0; l < static_cast<int>(layers.size()); ++l) own_memory_[l].bind(layer_states(l));
}

std::vector<StateTensor*> UpdateCompensation::layer_states(int l) {
  if (!enabled() || states_[l].size() == 0) return {};   // a layer without parameters
  return {&states_[l]};
}

std::vector<std::vector<StatePiece>> UpdateCompensation::state_pieces(int l) const {
  if (!enabled() || states_[l].size() == 0) return {};
  std::vector<StatePiece> pieces;
  for (const ParamEntry& e : tables_[l].entries)
    pieces.push_back({state_piece_name("optim/compensation", e.name), e.shape, e.offset, {}, e.row_offset, e.tensor_rows});
  return {pieces};
}

size_t UpdateCompensation::state_bytes() const {
  size_t n = 0;
  for (const StateTensor& s : states_) n += s.spec().bytes();
  return n;
}

}  // namespace asteria
