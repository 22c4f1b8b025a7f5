#include "optim/kl_shampoo.hpp"

#include <algorithm>
#include <cmath>

#include "optim/block_math.hpp"
#include "optim/eigenbasis.hpp"

namespace asteria {

using namespace blockmath;

KLShampooBlock::KLShampooBlock(std::string name, int64_t rows, int64_t cols, const PreconditionerParams& p)
    : BlockPreconditioner(std::move(name), rows, cols, p),
      SL_(rows * rows), SR_(cols * cols), QL_(rows * rows), QR_(cols * cols), M_(rows * cols),
      dL_(rows), dR_(cols), tmp1_(rows * cols), tmp2_(rows * cols), tmp3_(rows * cols),
      ldiag_(rows), rdiag_(cols) {}

PreconditionerBytes KLShampooBlock::state_bytes() const {
  return preconditioner_bytes("kl_shampoo", rows_, cols_);
}

void KLShampooBlock::initialize(const float* G) {
  const int64_t m = rows_, n = cols_;
  const float b = static_cast<float>(p_.shampoo_beta);
  accumulate_left(G, m, n, 0.0f, (1.0f - b) / static_cast<float>(n), SL_.data());
  accumulate_right(G, m, n, 0.0f, (1.0f - b) / static_cast<float>(m), SR_.data());
  RefreshJob status_only;
  status_only.status = eigenbasis::initial(m, SL_.data(), QL_.data());
  const matfn::Status right = eigenbasis::initial(n, SR_.data(), QR_.data());
  if (status_only.status == matfn::Status::Ok) status_only.status = right;
  if (status_only.status != matfn::Status::Ok) publish(status_only);
  const float d0 = static_cast<float>(1.0 / std::sqrt(p_.kl_init_factor));
  std::fill(dL_.data(), dL_.data() + m, d0);
  std::fill(dR_.data(), dR_.data() + n, d0);
  initialized_ = true;
}

void KLShampooBlock::update_estimates(const double* diag, float* d, int64_t dim) {
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

void KLShampooBlock::before_refresh(const float* G) {
  if (!initialized_) {
    initialize(G);
    has_direction_ = false;
    return;
  }
  has_direction_ = true;
  ++t_;
  const int64_t m = rows_, n = cols_, mn = m * n;
  const float b1 = static_cast<float>(p_.beta1);
  const float damping = static_cast<float>(p_.eps);
  const float* dL = dL_.data();
  const float* dR = dR_.data();
  float* M = M_.data();
  for (int64_t i = 0; i < mn; ++i) M[i] = b1 * M[i] + (1.0f - b1) * G[i];

  // Direction: Q_L [(Q_L^T M Q_R) * s / (1 + s damping)] Q_R^T.
  float* P = tmp2_.data();
  to_basis(QL_.data(), M, QR_.data(), m, n, tmp1_.data(), P);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      const float s = dL[i] * dR[j];
      P[i * n + j] *= s / (1.0f + s * damping);
    }
  from_basis(QL_.data(), P, QR_.data(), m, n, tmp1_.data(), direction_.data());

  // Statistics, all from the current basis and estimates.
  float* C = tmp1_.data();   // Q_L^T G
  float* B = tmp2_.data();   // G Q_R
  float* H = tmp3_.data();   // Q_L^T G Q_R
  mul(true, false, m, n, m, 1.0f, QL_.data(), G, 0.0f, C);
  mul(false, false, m, n, n, 1.0f, G, QR_.data(), 0.0f, B);
  mul(false, false, m, n, n, 1.0f, C, QR_.data(), 0.0f, H);
  std::fill(ldiag_.begin(), ldiag_.end(), 0.0);
  std::fill(rdiag_.begin(), rdiag_.end(), 0.0);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      const double h = H[i * n + j];
      ldiag_[i] += (h * dR[j]) * (h * dR[j]);
      rdiag_[j] += (h * dL[i]) * (h * dL[i]);
    }
  for (auto& x : ldiag_) x /= static_cast<double>(n);
  for (auto& x : rdiag_) x /= static_cast<double>(m);
  // G S_R^-1 G^T = (G Q_R diag(d_R)) (G Q_R diag(d_R))^T; G^T S_L^-1 G likewise.
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      B[i * n + j] *= dR[j];
      C[i * n + j] *= dL[i];
    }
  const float b = static_cast<float>(p_.shampoo_beta);
  accumulate_left(B, m, n, b, (1.0f - b) / static_cast<float>(n), SL_.data());
  accumulate_right(C, m, n, b, (1.0f - b) / static_cast<float>(m), SR_.data());
  update_estimates(ldiag_.data(), dL_.data(), m);
  update_estimates(rdiag_.data(), dR_.data(), n);
}

void KLShampooBlock::snapshot(RefreshJob& job) const {
  eigenbasis::snapshot(job, rows_, cols_, SL_.data(), SR_.data(), QL_.data(), QR_.data());
}

void KLShampooBlock::compute_refresh(RefreshJob& job, matfn::Workspace& ws) const {
  eigenbasis::refresh(job, ws, /*sort=*/false);  // the authors refresh without re-sorting
}

void KLShampooBlock::install(const RefreshJob& job) {
  to_float(rows_ * rows_, job.left_basis.data(), QL_.data());
  to_float(cols_ * cols_, job.right_basis.data(), QR_.data());
}

}  // namespace asteria
