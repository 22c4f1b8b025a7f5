#include "runtime/root_job_placement.hpp"

#include <algorithm>
#include <utility>

#include "core/error.hpp"

namespace asteria {

RootJobPlacement::RootJobPlacement(const RefreshSchedule& schedule, const std::vector<std::vector<MatrixBlock>>& blocks,
                                   ShadowDelay delay, int threads)
    : schedule_(schedule), delay_(delay) {
  ASTERIA_ASSERT(delay.delay >= 1 && threads >= 1);
  const int64_t F = schedule.frequency();
  // Every block's job, largest first (stable: ties keep the (layer, block) order).
  std::vector<std::pair<PlacedJob, double>> entries;
  for (int l = 0; l < static_cast<int>(blocks.size()); ++l) {
    lag_.emplace_back(blocks[l].size(), 0);
    for (int b = 0; b < static_cast<int>(blocks[l].size()); ++b)
      entries.push_back({PlacedJob{l, b, 0}, refresh_cost(blocks[l][b])});
  }
  std::stable_sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  std::vector<double> job_cost;
  for (const auto& [job, c] : entries) {
    by_cost_.push_back(job);
    job_cost.push_back(c);
  }

  // The first step each block refreshes at gives its residue mod F.
  std::vector<int64_t> first(by_cost_.size());
  for (size_t k = 0; k < by_cost_.size(); ++k) {
    int64_t t = 1;
    while (!schedule.due(by_cost_[k].layer, by_cost_[k].block, t)) {
      ++t;
      ASTERIA_ASSERT(t < (int64_t{1} << 40), "refresh schedule never due");
    }
    first[k] = t;
  }

  // at[r]: the jobs (indices into by_cost_, ascending = largest first) run at steps t % F == r.
  std::vector<std::vector<size_t>> at(static_cast<size_t>(F));
  std::vector<double> busy(static_cast<size_t>(threads));
  // A step's batch time: jobs largest first, each to the thread that frees up first.
  auto batch_time = [&](const std::vector<size_t>& jobs) {
    std::fill(busy.begin(), busy.end(), 0.0);
    for (size_t k : jobs) *std::min_element(busy.begin(), busy.end()) += job_cost[k];
    return *std::max_element(busy.begin(), busy.end());
  };
  auto residue = [&](size_t k, int64_t lag) { return static_cast<size_t>((first[k] + lag) % F); };
  auto insert = [&](std::vector<size_t>& jobs, size_t k) { jobs.insert(std::upper_bound(jobs.begin(), jobs.end(), k), k); };
  auto erase = [&](std::vector<size_t>& jobs, size_t k) { jobs.erase(std::find(jobs.begin(), jobs.end(), k)); };
  // How much the period's total batch time changes when job k moves to `lag`.
  auto gain = [&](size_t k, int64_t lag) {
    const size_t from = residue(k, lag_[by_cost_[k].layer][by_cost_[k].block]), to = residue(k, lag);
    if (from == to) return 0.0;
    const double before = batch_time(at[from]) + batch_time(at[to]);
    erase(at[from], k);
    insert(at[to], k);
    const double after = batch_time(at[from]) + batch_time(at[to]);
    erase(at[to], k);
    insert(at[from], k);
    return before - after;
  };
  const int64_t lags = std::min(delay.delay, F);
  // Greedy, largest first: the lag whose step's batch grows least (ties: the smaller lag) ...
  for (size_t k = 0; k < by_cost_.size(); ++k) {
    int64_t best = 0;
    double best_growth = 0;
    for (int64_t lag = 0; lag < lags; ++lag) {
      std::vector<size_t>& jobs = at[residue(k, lag)];
      const double before = batch_time(jobs);
      insert(jobs, k);
      const double growth = batch_time(jobs) - before;
      erase(jobs, k);
      if (lag == 0 || growth < best_growth) best = lag, best_growth = growth;
    }
    insert(at[residue(k, best)], k);
    lag_[by_cost_[k].layer][by_cost_[k].block] = best;
  }
  // ... then single moves while one shortens the period (greedy alone leaves the first large
  // jobs, placed into empty steps, unpaired).
  const double tolerance = 1e-9 * *std::max_element(job_cost.begin(), job_cost.end());
  for (int pass = 0; pass < 100; ++pass) {
    bool moved = false;
    for (size_t k = 0; k < by_cost_.size(); ++k) {
      int64_t& current = lag_[by_cost_[k].layer][by_cost_[k].block];
      int64_t best = current;
      double best_gain = tolerance;
      for (int64_t lag = 0; lag < lags; ++lag) {
        const double g = gain(k, lag);
        if (g > best_gain) best = lag, best_gain = g;
      }
      if (best == current) continue;
      erase(at[residue(k, current)], k);
      insert(at[residue(k, best)], k);
      current = best;
      moved = true;
    }
    if (!moved) break;
  }
}

void RootJobPlacement::jobs_at(int64_t step, std::vector<PlacedJob>& out) const {
  out.clear();
  for (const PlacedJob& j : by_cost_) {
    const int64_t opened = step - lag_[j.layer][j.block];
    if (opened >= 1 && delay_.at(opened) > 0 && schedule_.due(j.layer, j.block, opened))
      out.push_back({j.layer, j.block, opened});
  }
}

}  // namespace asteria
