#include "optim/refresh_schedule.hpp"

#include <algorithm>
#include <numeric>

namespace asteria {

double refresh_cost(const MatrixBlock& b) {
  const double r = static_cast<double>(b.rows), c = static_cast<double>(b.cols);
  return r * r * r + c * c * c;
}

namespace {

struct BlockRef {
  int layer, block;
  double cost;
};

// Step slot (0..F-1) of every block, balanced by refresh cost (see the header).
std::vector<std::vector<int64_t>> balanced_offsets(int64_t frequency,
                                                   const std::vector<std::vector<MatrixBlock>>& blocks) {
  std::vector<BlockRef> order;
  for (size_t l = 0; l < blocks.size(); ++l)
    for (size_t b = 0; b < blocks[l].size(); ++b)
      order.push_back({static_cast<int>(l), static_cast<int>(b), refresh_cost(blocks[l][b])});
  // stable: equal costs keep (layer, block) order
  std::stable_sort(order.begin(), order.end(), [](const BlockRef& a, const BlockRef& b) { return a.cost > b.cost; });

  const auto F = static_cast<size_t>(frequency);
  std::vector<double> load(F, 0.0);
  std::vector<std::vector<int64_t>> bin(blocks.size());
  for (size_t l = 0; l < blocks.size(); ++l) bin[l].assign(blocks[l].size(), 0);
  for (const BlockRef& r : order) {
    const size_t least = static_cast<size_t>(std::min_element(load.begin(), load.end()) - load.begin());
    bin[r.layer][r.block] = static_cast<int64_t>(least);
    load[least] += r.cost;
  }

  // Bins by load, heaviest first (ties: lower bin), then placed heaviest, lightest, ...
  std::vector<size_t> by_load(F);
  std::iota(by_load.begin(), by_load.end(), size_t{0});
  std::stable_sort(by_load.begin(), by_load.end(), [&](size_t a, size_t b) { return load[a] > load[b]; });
  std::vector<int64_t> slot_of_bin(F);
  for (size_t k = 0, lo = 0, hi = F; k < F; ++k) {
    const size_t b = k % 2 == 0 ? by_load[lo++] : by_load[--hi];
    slot_of_bin[b] = static_cast<int64_t>(k);
  }
  for (auto& layer : bin)
    for (auto& b : layer) b = slot_of_bin[static_cast<size_t>(b)];
  return bin;
}

}  // namespace

RefreshSchedule::RefreshSchedule(OptimizerKind algorithm, int64_t frequency, int64_t start_step,
                                 bool stagger, const std::vector<std::vector<MatrixBlock>>& blocks)
    : shampoo_(algorithm == OptimizerKind::Shampoo), frequency_(frequency), start_(start_step) {
  if (stagger) {
    offsets_ = balanced_offsets(frequency, blocks);
  } else {
    for (const auto& layer : blocks) offsets_.emplace_back(layer.size(), 0);
  }
}

RefreshSchedule RefreshSchedule::subset(const std::vector<std::vector<int>>& index) const {
  RefreshSchedule s = *this;
  s.offsets_.clear();
  for (size_t l = 0; l < index.size(); ++l) {
    s.offsets_.emplace_back();
    for (int g : index[l]) s.offsets_.back().push_back(offsets_[l].at(static_cast<size_t>(g)));
  }
  return s;
}

int64_t RefreshSchedule::phase(int layer, int block) const {
  // Shampoo: (t + offset) % F == 0; SOAP, KL-Shampoo: (t - 1 + offset) % F == 0.
  const int64_t shift = offsets_[layer][block] - (shampoo_ ? 0 : 1);
  return ((-shift) % frequency_ + frequency_) % frequency_;
}

bool RefreshSchedule::due(int layer, int block, int64_t step) const {
  const int64_t first = shampoo_ ? start_ : 2;
  if (step < first) return false;
  return (shampoo_ && step == start_) || step % frequency_ == phase(layer, block);
}

}  // namespace asteria
