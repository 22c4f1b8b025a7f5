#include "optim/kl_shampoo.hpp"

#include <algorithm>
#include <cmath>

#include "optim/block_math.hpp"
#include "optim/run_beside.hpp"
#include "optim/thread_scratch.hpp"

namespace asteria {

using namespace blockmath;

KLShampooBlock::KLShampooBlock(std::string name, int64_t rows, int64_t cols, const PreconditionerParams& p,
                               bool own_memory, const BlockBackend& backend)
    : EigenbasisBlock(name, rows, cols, p, preconditioner_state_specs(OptimizerKind::KlShampoo, name, rows, cols), own_memory,
                      backend, /*sort=*/false, static_cast<float>((1.0 - p.shampoo_beta) / static_cast<double>(cols)),
                      static_cast<float>((1.0 - p.shampoo_beta) / static_cast<double>(rows))),
      ldiag_(rows), rdiag_(cols) {}

void KLShampooBlock::initialized() {
  const float d0 = static_cast<float>(1.0 / std::sqrt(p_.kl_init_factor));
  const std::vector<float> left(static_cast<size_t>(rows_), d0), right(static_cast<size_t>(cols_), d0);
  backend_.from_host(dL_.data(), left.data(), left.size());
  backend_.from_host(dR_.data(), right.data(), right.size());   // returns once `right` may go
}

void KLShampooBlock::update_estimates(const double* diag, float* d, int64_t dim) const {
  const double b = p_.shampoo_beta;
  const double cap = std::max(10.0, std::min(static_cast<double>(dim), p_.kl_max_clamp));
  for (int64_t i = 0; i < dim; ++i) {
    double lambda = d[i] != 0.0f ? 1.0 / (static_cast<double>(d[i]) * d[i]) : 0.0;
    if (!std::isfinite(lambda)) lambda = 0.0;
    lambda = b * lambda + (1.0 - b) * diag[i];
    double inv_sqrt = lambda > 0 ? 1.0 / std::sqrt(lambda) : 0.0;
    if (!std::isfinite(inv_sqrt)) inv_sqrt = 0.0;
    d[i] = static_cast<float>(std::min(inv_sqrt, cap));
  }
}

void KLShampooBlock::update(const float* G) {
  const BlockBackend& be = backend_;
  const int64_t m = rows_, n = cols_, mn = m * n;
  const float b1 = static_cast<float>(p_.beta1);
  const float damping = static_cast<float>(p_.eps);
  const float* dL = dL_.data();
  const float* dR = dR_.data();
  float* M = M_.data();
  float* tmp1 = be.scratch(0, static_cast<size_t>(mn));
  float* tmp2 = be.scratch(1, static_cast<size_t>(mn));
  float* tmp3 = be.scratch(2, static_cast<size_t>(mn));
  be.ema(M, G, static_cast<size_t>(mn), b1, one_minus(p_.beta1));

  // Direction: Q_L [(Q_L^T M Q_R) * s / (1 + s damping)] Q_R^T.
  float* P = tmp2;
  be.to_basis(QL_.data(), M, QR_.data(), m, n, tmp1, P);
  be.kl_damp(P, dL, dR, m, n, damping);
  be.from_basis(QL_.data(), P, QR_.data(), m, n, tmp1, direction_data());

  // Statistics, all from the current basis and estimates.
  float* C = tmp1;   // Q_L^T G
  float* B = tmp2;   // G Q_R
  float* H = tmp3;   // Q_L^T G Q_R
  be.mul(true, false, m, n, m, 1.0f, QL_.data(), G, 0.0f, C);
  be.mul(false, false, m, n, n, 1.0f, G, QR_.data(), 0.0f, B);
  be.mul(false, false, m, n, n, 1.0f, C, QR_.data(), 0.0f, H);
  be.kl_factor_diagonals(H, dL, dR, m, n, ldiag_.data(), rdiag_.data());
  for (auto& x : ldiag_) x /= static_cast<double>(n);
  for (auto& x : rdiag_) x /= static_cast<double>(m);
  // G S_R^-1 G^T = (G Q_R diag(d_R)) (G Q_R diag(d_R))^T; G^T S_L^-1 G likewise.
  be.scale_columns(B, dR, m, n);
  be.scale_rows(C, dL, m, n);
  const float b = static_cast<float>(p_.shampoo_beta);
  const float left_scale = static_cast<float>((1.0 - p_.shampoo_beta) / static_cast<double>(n));
  const float right_scale = static_cast<float>((1.0 - p_.shampoo_beta) / static_cast<double>(m));
  run_beside(  // the two factors beside each other (run_beside.hpp)
      be, [&] { be.accumulate_right(C, m, n, b, right_scale, R_.data()); },
      [&] { be.accumulate_left(B, m, n, b, left_scale, L_.data()); });
  // The estimates on the host (m + n values): in place, or on copies of a device's.
  if (!be.on_device()) {
    update_estimates(ldiag_.data(), dL_.data(), m);
    update_estimates(rdiag_.data(), dR_.data(), n);
    return;
  }
  dl_host_.resize(static_cast<size_t>(m));
  dr_host_.resize(static_cast<size_t>(n));
  be.to_host(dl_host_.data(), dL, dl_host_.size());
  be.to_host(dr_host_.data(), dR, dr_host_.size());
  update_estimates(ldiag_.data(), dl_host_.data(), m);
  update_estimates(rdiag_.data(), dr_host_.data(), n);
  be.from_host(dL_.data(), dl_host_.data(), dl_host_.size());
  be.from_host(dR_.data(), dr_host_.data(), dr_host_.size());
}

}  // namespace asteria
