#include "runtime/root_job_placement.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>
#include <set>

#include "core/error.hpp"
#include "optim/preconditioner.hpp"

namespace asteria {

RootJobPlacement::RootJobPlacement(const RefreshSchedule& schedule, const PartCosts& costs, ShadowDelay delay,
                                   int threads, bool two_batches)
    : schedule_(schedule), delay_(delay), threads_(threads), two_batches_(two_batches) {
  ASTERIA_ASSERT(delay.delay >= 1 && threads >= 1);
  const int64_t F = schedule.frequency();
  for (int l = 0; l < static_cast<int>(costs.size()); ++l) {
    index_.emplace_back(costs[l].size(), 0);
    for (int b = 0; b < static_cast<int>(costs[l].size()); ++b) {
      ASTERIA_ASSERT(!costs[l][b].empty(), "a refresh of no parts");
      const int64_t t = schedule.phase(l, b);
      const double total = std::accumulate(costs[l][b].begin(), costs[l][b].end(), 0.0);
      refreshes_.push_back({l, b, t, costs[l][b], std::vector<int64_t>(costs[l][b].size(), 0), total});
    }
  }
  // Largest first (stable: ties keep the (layer, block) order).
  std::stable_sort(refreshes_.begin(), refreshes_.end(), [](const Refresh& a, const Refresh& b) { return a.total > b.total; });
  for (size_t i = 0; i < refreshes_.size(); ++i) index_[refreshes_[i].layer][refreshes_[i].block] = i;

  // members_[r]: the refreshes with a part at residue r; batch_[r]: that step's batch time.
  members_.assign(static_cast<size_t>(F), {});
  batch_.assign(static_cast<size_t>(F), 0.0);
  if (refreshes_.empty()) return;   // no blocks here (a sharded rank may own none)
  scale_ = 1.0 / refreshes_.front().total;
  const int64_t lags = std::min(delay.delay, F);
  for (size_t i = 0; i < refreshes_.size(); ++i) {
    std::set<size_t> touched;
    attach(i, touched);
  }
  // Two local searches, the greedy start's ties going to the smaller lag or to the larger one
  // (which pairs refreshes at lags >= 1 where a lag-0 task would run alone in its batch); the
  // better one is kept.
  std::vector<std::vector<int64_t>> first;
  double first_j = 0;
  for (bool later_on_ties : {false, true}) {
    place_greedily(lags, later_on_ties);
    improve_by_single_moves(lags);
    if (!later_on_ties) {
      first_j = objective();
      for (const Refresh& r : refreshes_) first.push_back(r.lag);
    }
  }
  if (first_j < objective())
    for (size_t i = 0; i < refreshes_.size(); ++i) set_lags(i, first[i]);
}

std::set<size_t> RootJobPlacement::detach(size_t i) {
  std::set<size_t> rs;
  for (int64_t lag : refreshes_[i].lag) rs.insert(residue(refreshes_[i], lag));
  for (size_t r : rs) members_[r].erase(std::find(members_[r].begin(), members_[r].end(), i));
  return rs;
}

void RootJobPlacement::attach(size_t i, std::set<size_t>& touched) {
  std::set<size_t> rs;
  for (int64_t lag : refreshes_[i].lag) rs.insert(residue(refreshes_[i], lag));
  for (size_t r : rs) members_[r].push_back(i);
  touched.insert(rs.begin(), rs.end());
  for (size_t r : touched) batch_[r] = batch_time(r);
}

// F * (a soft maximum: the 8-norm, which also falls when one of several longest batches does)
// + the period's sum, scaled by the largest refresh to keep the powers in range.
double RootJobPlacement::objective() const {
  double sum = 0, p8 = 0;
  for (double b : batch_) {
    const double x = b * scale_, x2 = x * x, x4 = x2 * x2;
    sum += x;
    p8 += x4 * x4;
  }
  return static_cast<double>(schedule_.frequency()) * std::pow(p8, 1.0 / 8) + sum;
}

double RootJobPlacement::set_lags(size_t i, const std::vector<int64_t>& lags) {
  std::set<size_t> touched = detach(i);
  refreshes_[i].lag = lags;
  attach(i, touched);
  return objective();
}

// Every refresh starts with its parts' costs held back (where it sits then does not count: a
// part without cost adds nothing to a batch); largest refresh first, its parts in order, each part
// gets its cost back and the lag (no smaller than the previous part's; the parts after it follow)
// that raises the objective least, ties: the smaller lag, or the larger one.
void RootJobPlacement::place_greedily(int64_t lags, bool later_on_ties) {
  std::vector<std::vector<double>> held(refreshes_.size());
  for (size_t i = 0; i < refreshes_.size(); ++i) {
    std::set<size_t> touched = detach(i);
    held[i].swap(refreshes_[i].cost);
    refreshes_[i].cost.assign(held[i].size(), 0.0);
    attach(i, touched);
  }
  for (size_t i = 0; i < refreshes_.size(); ++i) {
    Refresh& r = refreshes_[i];
    for (size_t k = 0; k < r.cost.size(); ++k) {
      r.cost[k] = held[i][k];
      std::vector<int64_t> best;
      double best_j = 0;
      for (int64_t lag = k > 0 ? r.lag[k - 1] : 0; lag < lags; ++lag) {
        std::vector<int64_t> candidate = r.lag;
        std::fill(candidate.begin() + static_cast<int64_t>(k), candidate.end(), lag);
        const double j = set_lags(i, candidate);
        if (best.empty() || j < best_j || (later_on_ties && j <= best_j)) best = candidate, best_j = j;
      }
      set_lags(i, best);
    }
  }
}

// Single moves, of one part (within its neighbours' lags) or of a whole refresh, while one lowers
// the objective.
void RootJobPlacement::improve_by_single_moves(int64_t lags) {
  const double tolerance = 1e-9;
  double current = objective();
  for (int pass = 0; pass < 100; ++pass) {
    bool moved = false;
    for (size_t i = 0; i < refreshes_.size(); ++i) {
      const std::vector<int64_t> start = refreshes_[i].lag;
      std::vector<int64_t> best = start;
      double best_j = current - tolerance;
      auto consider = [&](const std::vector<int64_t>& candidate) {
        if (candidate == start) return;
        const double j = set_lags(i, candidate);
        if (j < best_j) best = candidate, best_j = j;
      };
      const size_t parts = start.size();
      for (size_t k = 0; k < parts; ++k) {
        const int64_t lo = k > 0 ? start[k - 1] : 0, hi = k + 1 < parts ? start[k + 1] : lags - 1;
        for (int64_t lag = lo; lag <= hi; ++lag) {
          std::vector<int64_t> candidate = start;
          candidate[k] = lag;
          consider(candidate);
        }
      }
      for (int64_t lag = 0; lag < lags; ++lag) consider(std::vector<int64_t>(parts, lag));
      current = set_lags(i, best);
      moved |= best != start;
    }
    if (!moved) break;
  }
}

size_t RootJobPlacement::residue(const Refresh& r, int64_t lag) const {
  return static_cast<size_t>((r.first + lag) % schedule_.frequency());
}

// The step's batches, one after the other (with two: the parts of refreshes opened earlier,
// then those opened at this step); each takes as long as its busiest thread. (A refresh's parts
// at one residue share one lag: lags are below F.)
double RootJobPlacement::batch_time(size_t res) const {
  double total = 0;
  for (int batch = 0; batch < (two_batches_ ? 2 : 1); ++batch) {
    tasks_.clear();
    for (size_t i : members_[res]) {
      double c = 0;
      const Refresh& r = refreshes_[i];
      for (size_t k = 0; k < r.cost.size(); ++k)
        if (residue(r, r.lag[k]) == res && (!two_batches_ || (r.lag[k] == 0) == (batch == 1))) c += r.cost[k];
      if (c > 0) tasks_.push_back(c);
    }
    if (tasks_.empty()) continue;
    std::sort(tasks_.begin(), tasks_.end(), std::greater<>());
    busy_.assign(static_cast<size_t>(threads_), 0.0);
    for (double c : tasks_) *std::min_element(busy_.begin(), busy_.end()) += c;
    total += *std::max_element(busy_.begin(), busy_.end());
  }
  return total;
}

int64_t RootJobPlacement::lag(int layer, int block, int part) const {
  return refreshes_[index_[layer][block]].lag[part];
}

void RootJobPlacement::tasks_at(int64_t step, std::vector<PlacedTask>& out) const {
  out.clear();
  for (const Refresh& r : refreshes_) {
    // Lags are below min(D, F): of the openings they point to, at most one is due.
    for (size_t k = 0; k < r.lag.size();) {
      size_t end = k;
      while (end < r.lag.size() && r.lag[end] == r.lag[k]) ++end;
      const int64_t opened = step - r.lag[k];
      if (opened >= 1 && delay_.at(opened) > 0 && schedule_.due(r.layer, r.block, opened))
        out.push_back({r.layer, r.block, opened, static_cast<int>(k), static_cast<int>(end),
                       std::accumulate(r.cost.begin() + k, r.cost.begin() + end, 0.0)});
      k = end;
    }
  }
  std::stable_sort(out.begin(), out.end(), [](const PlacedTask& a, const PlacedTask& b) { return a.cost > b.cost; });
}

RootJobPlacement::PartCosts refresh_part_costs(OptimizerKind algorithm,
                                               const std::vector<std::vector<MatrixBlock>>& blocks) {
  RootJobPlacement::PartCosts costs;
  for (const auto& layer : blocks) {
    costs.emplace_back();
    for (const MatrixBlock& b : layer) costs.back().push_back(refresh_part_costs(algorithm, b.rows, b.cols));
  }
  return costs;
}

double RootJobPlacement::longest_batch() const { return *std::max_element(batch_.begin(), batch_.end()); }

double RootJobPlacement::period_batches() const { return std::accumulate(batch_.begin(), batch_.end(), 0.0); }

}  // namespace asteria
