#include "optim/shampoo.hpp"

#include <cmath>
#include <limits>

#include "optim/block_math.hpp"
#include "optim/run_beside.hpp"

namespace asteria {

using namespace blockmath;

ShampooBlock::ShampooBlock(std::string name, int64_t rows, int64_t cols, const PreconditionerParams& p,
                           bool own_memory, const BlockBackend& backend)
    : BlockPreconditioner(name, rows, cols, p, preconditioner_state_specs(OptimizerKind::Shampoo, name, rows, cols), own_memory,
                          backend) {}

void ShampooBlock::before_refresh(const float* G) {
  ++t_;
  const int64_t m = rows_, n = cols_, mn = m * n;
  const float keep = static_cast<float>(p_.shampoo_beta);
  const float add = p_.shampoo_beta >= 1.0 ? 1.0f : one_minus(p_.shampoo_beta);
  const float b1 = static_cast<float>(p_.beta1), b2 = static_cast<float>(p_.beta2);
  const float m_add = one_minus(p_.beta1), v_add = p_.beta2 >= 1.0 ? 1.0f : one_minus(p_.beta2);
  // The factors beside each other and the grafting moments (run_beside.hpp).
  const BlockBackend& be = backend_;
  run_beside(
      be,
      [&] {
        be.accumulate_right(G, m, n, keep, add, R_.data());
        be.shampoo_moments(M_.data(), V_.data(), G, mn, b1, b2, m_add, v_add);
      },
      [&] { be.accumulate_left(G, m, n, keep, add, L_.data()); });
}

void ShampooBlock::snapshot(RefreshJob& job) const {
  const int64_t m = rows_, n = cols_;
  job.rows = m;
  job.cols = n;
  job.left.resize(m * m);
  job.right.resize(n * n);
  const double bc = p_.shampoo_beta < 1.0 ? 1.0 - std::pow(p_.shampoo_beta, static_cast<double>(t_)) : 1.0;
  backend_.to_host_double(L_.data(), m * m, job.left.data());
  backend_.to_host_double(R_.data(), n * n, job.right.data());
  for (double& x : job.left) x /= bc;
  for (double& x : job.right) x /= bc;
}

void ShampooBlock::refresh_part(RefreshJob& job, int part, matfn::Workspace& ws) const {
  // Parts 0-1: the left factor's inverse root, 2-3: the right's. With root_method newton part 0
  // tries the coupled Newton iteration first; the eigendecomposition is the reference method, and
  // the retry after a Newton failure (a converged Newton root leaves part 1 nothing to do).
  const RefreshSide side = refresh_side(job, part, matfn::kInverseRootEighParts);
  side.root.resize(static_cast<size_t>(side.n) * side.n);
  if (side.stage == 0)
    side.newton_done = p_.root_method == RootMethod::Newton &&
                       matfn::inverse_root_newton(p_.refresh_dtype, side.n, side.factor, 4, p_.root_eps, side.root.data(),
                                                  ws) == matfn::Status::Ok;
  if (side.newton_done) return;
  job.status = matfn::inverse_root_eigh_part(side.stage, p_.refresh_dtype, side.n, side.factor, 4.0, p_.root_eps,
                                             side.root.data(), side.carry, ws);
}

bool ShampooBlock::refresh_on_backend(RefreshJob& job) const {
  if (p_.root_method != RootMethod::Eigh) return false;   // Newton: the host's
  for (int side = 0; side < 2; ++side) {
    const RefreshSide s = refresh_side(job, side * matfn::kInverseRootEighParts, matfn::kInverseRootEighParts);
    s.root.resize(static_cast<size_t>(s.n) * s.n);
    if (!backend_.inverse_root(p_.refresh_dtype, s.n, s.factor, 4.0, p_.root_eps, s.root.data(), job.status)) return false;
    if (job.status != matfn::Status::Ok) break;
  }
  return true;
}

void ShampooBlock::snapshot_installed(RefreshJob& job) const {
  job.installed_left.clear();
  job.installed_right.clear();
  if (!have_roots_) return;
  job.installed_left.resize(rows_ * rows_);
  job.installed_right.resize(cols_ * cols_);
  backend_.to_host(job.installed_left.data(), Linv_.data(), job.installed_left.size());
  backend_.to_host(job.installed_right.data(), Rinv_.data(), job.installed_right.size());
}

double ShampooBlock::refresh_change(const RefreshJob& job) const {
  if (job.installed_left.empty()) return std::numeric_limits<double>::infinity();
  double diff = 0, norm = 0;
  const auto side = [&](const std::vector<double>& root, const std::vector<float>& installed) {
    for (size_t i = 0; i < installed.size(); ++i) {
      diff += (root[i] - installed[i]) * (root[i] - installed[i]);
      norm += static_cast<double>(installed[i]) * installed[i];
    }
  };
  side(job.left_root, job.installed_left);
  side(job.right_root, job.installed_right);
  return norm > 0 ? std::sqrt(diff / norm) : std::numeric_limits<double>::infinity();
}

void ShampooBlock::install(const RefreshJob& job) {
  backend_.from_host_double(Linv_.data(), job.left_root.data(), rows_ * rows_);
  backend_.from_host_double(Rinv_.data(), job.right_root.data(), cols_ * cols_);
  have_roots_ = true;
}

void ShampooBlock::after_refresh(const float*) {
  const int64_t m = rows_, n = cols_, mn = m * n;
  const double t = static_cast<double>(t_);
  const float inv_bc1 = static_cast<float>(p_.beta1 > 0 ? 1.0 / (1.0 - std::pow(p_.beta1, t)) : 1.0);
  const float inv_bc2 = static_cast<float>(p_.beta2 < 1.0 ? 1.0 / (1.0 - std::pow(p_.beta2, t)) : 1.0);
  const float eps = static_cast<float>(p_.eps);
  const float* M = M_.data();
  const float* V = V_.data();
  float* D = direction_data();
  const bool graft = p_.grafting == Grafting::Adam;
  const BlockBackend& be = backend_;
  float* tmp = be.scratch(0, static_cast<size_t>(mn));
  // The Adam (grafting) direction and its norm.
  double adam_sq = 0;
  if (graft || !have_roots_) adam_sq = be.adam_direction(M, V, mn, inv_bc1, inv_bc2, eps, graft, have_roots_ ? tmp : D);
  if (!have_roots_) return;
  // D = Linv M_hat Rinv (the bias correction of M is a scalar, applied after).
  be.mul(false, false, m, n, m, inv_bc1, Linv_.data(), M, 0.0f, tmp);
  be.mul(false, false, m, n, n, 1.0f, tmp, Rinv_.data(), 0.0f, D);
  if (!graft) return;
  const double d_sq = be.sum_of_squares(D, mn);
  be.scale(D, static_cast<size_t>(mn), static_cast<float>(std::sqrt(adam_sq) / (std::sqrt(d_sq) + 1e-16)));
}

}  // namespace asteria
