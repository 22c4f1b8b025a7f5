#include "optim/eigenbasis.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/error.hpp"
#include "core/cpu/gemm.hpp"

namespace asteria {

EigenbasisBlock::EigenbasisBlock(std::string name, int64_t rows, int64_t cols, const PreconditionerParams& p,
                                 std::vector<StateSpec> states, bool own_memory, const BlockBackend& backend,
                                 bool sort, float init_left, float init_right)
    : BlockPreconditioner(std::move(name), rows, cols, p, std::move(states), own_memory, backend),
      sort_(sort), init_left_(init_left), init_right_(init_right) {}

void EigenbasisBlock::before_refresh(const float* G) {
  if (initialized_) {
    has_direction_ = true;
    ++t_;
    update(G);
    return;
  }
  const int64_t m = rows_, n = cols_;
  backend_.accumulate_left(G, m, n, 0.0f, init_left_, L_.data());
  backend_.accumulate_right(G, m, n, 0.0f, init_right_, R_.data());
  RefreshJob status_only;
  status_only.status = backend_.initial_eigenbasis(m, L_.data(), QL_.data(), p_.refresh_dtype);
  const matfn::Status right = backend_.initial_eigenbasis(n, R_.data(), QR_.data(), p_.refresh_dtype);
  if (status_only.status == matfn::Status::Ok) status_only.status = right;
  if (status_only.status != matfn::Status::Ok) publish(status_only);  // counted like any failure
  initialized_ = true;
  has_direction_ = false;
  initialized();
}

void EigenbasisBlock::snapshot(RefreshJob& job) const {
  const int64_t m = rows_, n = cols_;
  job.rows = m;
  job.cols = n;
  job.left.resize(m * m);
  job.right.resize(n * n);
  job.left_basis.resize(m * m);
  job.right_basis.resize(n * n);
  backend_.to_host_double(L_.data(), m * m, job.left.data());
  backend_.to_host_double(R_.data(), n * n, job.right.data());
  backend_.to_host_double(QL_.data(), m * m, job.left_basis.data());
  backend_.to_host_double(QR_.data(), n * n, job.right_basis.data());
  job.base_left_perm.clear();
  job.base_right_perm.clear();
}

void EigenbasisBlock::refresh_part(RefreshJob& job, int part, matfn::Workspace& ws) const {
  // Parts 0-2: the left factor's QR refresh, 3-5: the right's.
  const RefreshSide side = refresh_side(job, part, matfn::kQrRefreshParts);
  job.status = matfn::qr_refresh_part(side.stage, p_.refresh_dtype, side.n, side.factor, side.basis.data(), side.perm,
                                      side.carry, ws, sort_);
  // The side done: its columns permute the input basis, which continue_from may have permuted
  // from the installed one. New column k = input column perm[k] = installed column base[perm[k]].
  const std::vector<int>& base = part < matfn::kQrRefreshParts ? job.base_left_perm : job.base_right_perm;
  if (job.status == matfn::Status::Ok && side.stage == matfn::kQrRefreshParts - 1 && !base.empty())
    for (int& from : side.perm) from = base[from];
}

bool EigenbasisBlock::refresh_on_backend(RefreshJob& job) const {
  // Not for a job continuing from a dropped version (coherence): its permutations compose.
  if (!job.base_left_perm.empty() || !job.base_right_perm.empty()) return false;
  for (int side = 0; side < 2; ++side) {
    const RefreshSide s = refresh_side(job, side * matfn::kQrRefreshParts, matfn::kQrRefreshParts);
    if (!backend_.qr_refresh(p_.refresh_dtype, s.n, s.factor, s.basis.data(), s.perm, sort_, job.status)) return false;
    if (job.status != matfn::Status::Ok) break;
  }
  return true;
}

bool EigenbasisBlock::keep_dropped(const RefreshJob& job, RefreshJob& kept) const {
  const auto rounded = [](const std::vector<double>& from, std::vector<double>& to) {
    to.resize(from.size());
    for (size_t i = 0; i < from.size(); ++i) to[i] = static_cast<float>(from[i]);
  };
  kept.rows = job.rows;
  kept.cols = job.cols;
  rounded(job.left_basis, kept.left_basis);
  rounded(job.right_basis, kept.right_basis);
  kept.left_perm = job.left_perm;
  kept.right_perm = job.right_perm;
  return true;
}

void EigenbasisBlock::continue_from(const RefreshJob& kept, RefreshJob& job) const {
  ASTERIA_ASSERT(kept.rows == rows_ && kept.cols == cols_ && kept.left_basis.size() == job.left_basis.size() &&
                     kept.right_basis.size() == job.right_basis.size(),
                 "a kept version of ", name_, " has the wrong shape");
  job.left_basis = kept.left_basis;
  job.right_basis = kept.right_basis;
  job.base_left_perm = kept.left_perm;
  job.base_right_perm = kept.right_perm;
}

void EigenbasisBlock::snapshot_installed(RefreshJob& job) const {
  job.installed_left.resize(rows_ * rows_);
  job.installed_right.resize(cols_ * cols_);
  backend_.to_host(job.installed_left.data(), QL_.data(), job.installed_left.size());
  backend_.to_host(job.installed_right.data(), QR_.data(), job.installed_right.size());
}

double EigenbasisBlock::refresh_change(const RefreshJob& job) const {
  if (job.installed_left.empty()) return std::numeric_limits<double>::infinity();
  // What the new version changes is how well the basis diagonalizes the factors: with A =
  // Q_installed^T F Q_installed, the off-diagonal share ||offdiag A|| / ||A|| (both sides summed).
  // A column-by-column distance of the bases is no measure: eigenvectors of nearly equal
  // eigenvalues (most of a gradient covariance's spectrum) turn freely between refreshes while
  // what the basis does stays the same.
  static thread_local std::vector<double> q, fq, a;
  double off = 0, total = 0;
  const auto side = [&](int64_t n, const std::vector<double>& F, const std::vector<float>& installed) {
    const int d = static_cast<int>(n);
    q.assign(installed.begin(), installed.end());
    fq.resize(n * n);
    a.resize(n * n);
    cpu::gemm(false, false, d, d, d, 1.0, F.data(), d, q.data(), d, 0.0, fq.data(), d);
    cpu::gemm(true, false, d, d, d, 1.0, q.data(), d, fq.data(), d, 0.0, a.data(), d);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < n; ++j) {
        const double x = a[i * n + j] * a[i * n + j];
        total += x;
        if (i != j) off += x;
      }
  };
  side(rows_, job.left, job.installed_left);
  side(cols_, job.right, job.installed_right);
  return total > 0 ? std::sqrt(off / total) : std::numeric_limits<double>::infinity();
}

void EigenbasisBlock::install(const RefreshJob& job) {
  backend_.from_host_double(QL_.data(), job.left_basis.data(), rows_ * rows_);
  backend_.from_host_double(QR_.data(), job.right_basis.data(), cols_ * cols_);
}

}  // namespace asteria
