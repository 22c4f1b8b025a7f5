#include "runtime/shadow_job_buffers.hpp"

#include <algorithm>
#include <tuple>
#include <utility>

#include "core/error.hpp"
#include "core/timer.hpp"

namespace asteria {

JobBuffers::JobBuffers(const SecondOrderOptimizer& opt, WaitingTest waiting) : opt_(opt), waiting_(std::move(waiting)) {}

void JobBuffers::set_resident_jobs(int jobs, const std::string& file) {
  std::lock_guard<std::mutex> lock(mu_);
  resident_jobs_ = std::max(0, jobs);
  if (resident_jobs_ > 0 && !store_) store_ = std::make_unique<ShadowJobStore>(file);
  // Lowered: the buffers beyond it freed now (spares first, then waiting jobs', parked).
  while (resident_jobs_ > 0 && buffer_sets_ > resident_jobs_) {
    RefreshJob freed;
    if (!spares_.empty()) {
      spares_.pop_back();
    } else if (!park_one(&freed)) {
      break;   // every job with buffers is held (not between steps)
    }
    --buffer_sets_;
  }
}

void JobBuffers::lent(JobLoan& loan) {
  loan.has_buffers_ = true;
  loan.lent_at_ = lent_.size();
  lent_.push_back(&loan);
}

void JobBuffers::taken_back(JobLoan& loan) {
  loan.has_buffers_ = false;
  lent_.back()->lent_at_ = loan.lent_at_;
  std::swap(lent_[loan.lent_at_], lent_.back());
  lent_.pop_back();
}

bool JobBuffers::park_one(RefreshJob* into) {
  if (!store_) return false;
  candidates_.clear();
  for (JobLoan* l : lent_)
    if (l->pins_ == 0) candidates_.push_back({l});
  if (candidates_.empty()) return false;
  waiting_(candidates_);
  // The victim: the waiting job with the greatest publish step; among equals the first in
  // (layer, block, order). The pipeline's order is the position in its block's queue, so this is
  // the first found by a walk of its queues [layer][block][queue position] keeping the strictly
  // greatest, which is how the victim was chosen before the lender kept its own list: the same
  // job whatever the order of lent_.
  const Candidate* victim = nullptr;
  const auto first = [](const Candidate& a, const Candidate& b) {
    const JobLoan& x = *a.loan;
    const JobLoan& y = *b.loan;
    if (x.publish_step != y.publish_step) return x.publish_step > y.publish_step;
    return std::tie(x.layer, x.block, a.order) < std::tie(y.layer, y.block, b.order);
  };
  for (const Candidate& c : candidates_)
    if (c.waiting && (!victim || first(c, *victim))) victim = &c;
  if (!victim) return false;
  JobLoan& v = *victim->loan;
  Timer t;
  store_->park(v.job, victim->finished, v.parked_, opt_.blocks(v.layer)[v.block].name);
  park_s_ += t.seconds();
  swap_refresh_job_arrays(*into, v.job);
  taken_back(v);
  return true;
}

size_t JobBuffers::best_fitting_spare(int64_t rows, int64_t cols) const {
  // The spare whose factors' arrays already hold this block's with the least room to spare, else
  // the largest: a set grows (fresh memory, slow to touch) only when no spare is large enough, so
  // the sets settle at once into the sizes of the jobs in flight instead of growing a little each
  // time a larger block draws a smaller set.
  const auto room = [&](const RefreshJob& j) {
    return static_cast<double>(j.left.capacity()) + static_cast<double>(j.right.capacity());
  };
  const auto fits = [&](const RefreshJob& j) {
    return j.left.capacity() >= static_cast<size_t>(rows * rows) && j.right.capacity() >= static_cast<size_t>(cols * cols);
  };
  const auto better = [&](const RefreshJob& a, const RefreshJob& b) {
    if (fits(a) != fits(b)) return fits(a);
    return fits(a) ? room(a) < room(b) : room(a) > room(b);
  };
  size_t best = 0;
  for (size_t i = 1; i < spares_.size(); ++i)
    if (better(spares_[i], spares_[best])) best = i;
  return best;
}

void JobBuffers::hold(JobLoan& loan) {
  std::lock_guard<std::mutex> lock(mu_);
  ++loan.pins_;
  if (loan.has_buffers_) return;
  if (!spares_.empty()) {
    const MatrixBlock& b = opt_.blocks(loan.layer)[loan.block];
    std::swap(spares_[best_fitting_spare(b.rows, b.cols)], spares_.back());
    swap_refresh_job_arrays(loan.job, spares_.back());
    spares_.pop_back();
  } else if (resident_jobs_ == 0 || buffer_sets_ < resident_jobs_ || !park_one(&loan.job)) {
    // New buffers (allocated as the job is filled): within the budget, or beyond it when every
    // job in memory is held.
    if (resident_jobs_ > 0 && buffer_sets_ >= resident_jobs_) ++over_budget_;
    ++buffer_sets_;
  }
  lent(loan);
  if (loan.parked_.on_disk) {
    Timer t;
    store_->unpark(loan.job, loan.parked_, opt_.blocks(loan.layer)[loan.block].name);
    park_s_ += t.seconds();
  }
}

void JobBuffers::let_go(JobLoan& loan) {
  std::lock_guard<std::mutex> lock(mu_);
  ASTERIA_ASSERT(loan.pins_ > 0);
  --loan.pins_;
}

void JobBuffers::release(JobLoan& loan) {
  std::lock_guard<std::mutex> lock(mu_);
  ASTERIA_ASSERT(loan.pins_ == 0, "a refresh slot released while held");
  if (store_) store_->discard(loan.parked_);
  if (!loan.has_buffers_) return;
  RefreshJob buffers;
  swap_refresh_job_arrays(buffers, loan.job);
  taken_back(loan);
  // Lent beyond the budget while every job was held: freed, not kept.
  if (resident_jobs_ > 0 && buffer_sets_ > resident_jobs_) {
    --buffer_sets_;
  } else {
    spares_.push_back(std::move(buffers));
  }
}

}  // namespace asteria
