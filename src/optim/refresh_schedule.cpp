#include "optim/refresh_schedule.hpp"

namespace asteria {

RefreshSchedule::RefreshSchedule(const std::string& algorithm, int64_t frequency, int64_t start_step,
                                 bool stagger, const std::vector<std::vector<MatrixBlock>>& blocks)
    : shampoo_(algorithm == "shampoo"), frequency_(frequency), start_(start_step) {
  int64_t global = 0;
  for (const auto& layer : blocks) {
    std::vector<int64_t> offsets;
    for (size_t b = 0; b < layer.size(); ++b) offsets.push_back(stagger ? global++ % frequency : 0);
    offsets_.push_back(std::move(offsets));
  }
}

int64_t RefreshSchedule::count_at(int64_t step) const {
  if (shampoo_) return step >= start_ ? step - start_ : -1;
  return step >= 2 ? step - 1 : -1;
}

bool RefreshSchedule::due(int layer, int block, int64_t step) const {
  const int64_t c = count_at(step);
  return c >= 0 && (c + offsets_[layer][block]) % frequency_ == 0;
}

}  // namespace asteria
