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
  tasks_by_size_.assign(static_cast<size_t>(F), {});
  batch_.assign(static_cast<size_t>(F), 0.0);
  if (refreshes_.empty()) return;   // no blocks here (a sharded rank may own none)
  scale_ = 1.0 / refreshes_.front().total;
  const int64_t lags = std::min(delay.delay, F);
  for (size_t i = 0; i < refreshes_.size(); ++i) {
    std::set<size_t> touched;
    attach(i, touched);
  }
  // Local searches from three starts, the best result kept: greedy with ties going to the
  // smaller lag, or to the larger one (which pairs refreshes at lags >= 1 where a lag-0 task would
  // run alone in its batch), and every refresh spread evenly over the lags by cost.
  std::vector<std::vector<int64_t>> best;
  double best_j = 0;
  for (int start = 0; start < 3; ++start) {
    if (start < 2) place_greedily(lags, start == 1);
    else spread(lags);
    improve(lags);
    if (best.empty() || objective() < best_j) {
      best_j = objective();
      best.clear();
      for (const Refresh& r : refreshes_) best.push_back(r.lag);
    }
  }
  for (size_t i = 0; i < refreshes_.size(); ++i) set_lags(i, best[i]);
}

// Each refresh's parts over the lags by cumulative cost: part k at lag floor(lags * c_k / total),
// c_k the refresh's cost up to the middle of part k.
void RootJobPlacement::spread(int64_t lags) {
  for (size_t i = 0; i < refreshes_.size(); ++i) {
    const Refresh& r = refreshes_[i];
    std::vector<int64_t> lag(r.cost.size());
    double done = 0;
    for (size_t k = 0; k < r.cost.size(); ++k) {
      const double middle = (done + r.cost[k] / 2) / r.total;
      lag[k] = std::min<int64_t>(lags - 1, static_cast<int64_t>(middle * static_cast<double>(lags)));
      done += r.cost[k];
    }
    set_lags(i, lag);
  }
}

std::set<size_t> RootJobPlacement::detach(size_t i) {
  std::set<size_t> rs;
  for (int64_t lag : refreshes_[i].lag) rs.insert(residue(refreshes_[i], lag));
  for (size_t r : rs) {
    auto m = std::find_if(members_[r].begin(), members_[r].end(), [i](const Member& x) { return x.refresh == i; });
    for (int batch = 0; batch < 2; ++batch)
      if (m->cost[batch] > 0) {
        std::vector<double>& tasks = tasks_by_size_[r][batch];
        tasks.erase(std::lower_bound(tasks.begin(), tasks.end(), m->cost[batch], std::greater<>()));
      }
    members_[r].erase(m);
  }
  return rs;
}

void RootJobPlacement::attach(size_t i, std::set<size_t>& touched) {
  const Refresh& r = refreshes_[i];
  std::set<size_t> rs;
  for (int64_t lag : r.lag) rs.insert(residue(r, lag));
  for (size_t res : rs) {
    // Its task in each of the step's batches: the parts at this residue (a refresh's parts at
    // one residue share one lag, as lags are below F).
    Member m{i, {0.0, 0.0}};
    for (size_t k = 0; k < r.cost.size(); ++k)
      if (residue(r, r.lag[k]) == res) m.cost[two_batches_ && r.lag[k] == 0 ? 1 : 0] += r.cost[k];
    members_[res].push_back(m);
    for (int batch = 0; batch < 2; ++batch)
      if (m.cost[batch] > 0) {
        std::vector<double>& tasks = tasks_by_size_[res][batch];
        tasks.insert(std::upper_bound(tasks.begin(), tasks.end(), m.cost[batch], std::greater<>()), m.cost[batch]);
      }
  }
  touched.insert(rs.begin(), rs.end());
  for (size_t res : touched) batch_[res] = batch_time(res);
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

namespace {

// The moves of a refresh whose parts sit at `lag`: one part to another lag between its
// neighbours', or the whole refresh to one lag; each candidate passed to visit.
template <class Visit>
void each_move(const std::vector<int64_t>& lag, int64_t lags, Visit&& visit) {
  const size_t parts = lag.size();
  std::vector<int64_t> candidate = lag;
  for (size_t k = 0; k < parts; ++k) {
    const int64_t lo = k > 0 ? lag[k - 1] : 0, hi = k + 1 < parts ? lag[k + 1] : lags - 1;
    for (int64_t to = lo; to <= hi; ++to)
      if (to != lag[k]) {
        candidate[k] = to;
        visit(candidate);
      }
    candidate[k] = lag[k];
  }
  for (int64_t to = 0; to < lags; ++to) {
    std::vector<int64_t> whole(parts, to);
    if (whole != lag) visit(whole);
  }
}

}  // namespace

// Single moves (each_move) while one lowers the objective; then, where none does, the best joint
// move of two of the four largest refreshes in the longest step (two large refreshes sharing a
// step, neither of which can leave alone without filling another), and single moves again; at
// most 10 joint moves (each costs (parts x lags)^2 evaluations).
void RootJobPlacement::improve(int64_t lags) {
  const double tolerance = 1e-9;
  double current = objective();
  for (int round = 0; round < 10; ++round) {
    for (int pass = 0; pass < 100; ++pass) {
      bool moved = false;
      for (size_t i = 0; i < refreshes_.size(); ++i) {
        const std::vector<int64_t> start = refreshes_[i].lag;
        std::vector<int64_t> best = start;
        double best_j = current - tolerance;
        each_move(start, lags, [&](const std::vector<int64_t>& candidate) {
          const double j = set_lags(i, candidate);
          if (j < best_j) best = candidate, best_j = j;
        });
        current = set_lags(i, best);
        moved |= best != start;
      }
      if (!moved) break;
    }
    // The longest step's largest refreshes (members_ lists each refresh once; largest first).
    const size_t longest = static_cast<size_t>(std::max_element(batch_.begin(), batch_.end()) - batch_.begin());
    std::vector<size_t> large;
    for (const Member& m : members_[longest]) large.push_back(m.refresh);
    std::sort(large.begin(), large.end());
    large.resize(std::min<size_t>(large.size(), 4));
    bool moved = false;
    for (size_t a = 0; a < large.size() && !moved; ++a)
      for (size_t b = a + 1; b < large.size() && !moved; ++b) {
        const size_t i = large[a], k = large[b];
        const std::vector<int64_t> start_i = refreshes_[i].lag, start_k = refreshes_[k].lag;
        std::vector<int64_t> best_i = start_i, best_k = start_k;
        double best_j = current - tolerance;
        each_move(start_i, lags, [&](const std::vector<int64_t>& ci) {
          set_lags(i, ci);
          each_move(start_k, lags, [&](const std::vector<int64_t>& ck) {
            const double j = set_lags(k, ck);
            if (j < best_j) best_i = ci, best_k = ck, best_j = j;
          });
        });
        set_lags(i, best_i);
        current = set_lags(k, best_k);
        moved = best_i != start_i || best_k != start_k;
      }
    if (!moved) break;
  }
}

size_t RootJobPlacement::residue(const Refresh& r, int64_t lag) const {
  return static_cast<size_t>((r.first + lag) % schedule_.frequency());
}

// The step's batches, one after the other (with two: the parts of refreshes opened earlier,
// then those opened at this step); each takes as long as its busiest thread.
double RootJobPlacement::batch_time(size_t res) const {
  double total = 0;
  for (int batch = 0; batch < (two_batches_ ? 2 : 1); ++batch) {
    const std::vector<double>& tasks = tasks_by_size_[res][batch];
    if (tasks.empty()) continue;
    busy_.assign(static_cast<size_t>(threads_), 0.0);
    for (double c : tasks) *std::min_element(busy_.begin(), busy_.end()) += c;
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
