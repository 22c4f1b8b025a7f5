#include "optim/kl_shampoo.hpp"

#include <algorithm>
#include <cmath>

#include "optim/block_math.hpp"
#include "optim/thread_scratch.hpp"

namespace asteria {

using namespace blockmath;

KLShampooBlock::KLShampooBlock(std::string name, int64_t rows, int64_t cols, const PreconditionerParams& p,
                               bool own_memory)
    : EigenbasisBlock(name, rows, cols, p, preconditioner_state_specs("kl_shampoo", name, rows, cols), own_memory,
                      host_block_backend(), /*sort=*/false, static_cast<float>((1.0 - p.shampoo_beta) / static_cast<double>(cols)),
                      static_cast<float>((1.0 - p.shampoo_beta) / static_cast<double>(rows))),
      ldiag_(rows), rdiag_(cols) {}

void KLShampooBlock::initialized() {
  const float d0 = static_cast<float>(1.0 / std::sqrt(p_.kl_init_factor));
  std::fill(dL_.data(), dL_.data() + rows_, d0);
  std::fill(dR_.data(), dR_.data() + cols_, d0);
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

void KLShampooBlock::update(const float* G) {
  const int64_t m = rows_, n = cols_, mn = m * n;
  const float b1 = static_cast<float>(p_.beta1);
  const float damping = static_cast<float>(p_.eps);
  const float* dL = dL_.data();
  const float* dR = dR_.data();
  float* M = M_.data();
  float* tmp1 = thread_scratch(0, static_cast<size_t>(mn));
  float* tmp2 = thread_scratch(1, static_cast<size_t>(mn));
  float* tmp3 = thread_scratch(2, static_cast<size_t>(mn));
  const float a1 = one_minus(p_.beta1);
  for (int64_t i = 0; i < mn; ++i) M[i] = b1 * M[i] + a1 * G[i];

  // Direction: Q_L [(Q_L^T M Q_R) * s / (1 + s damping)] Q_R^T.
  float* P = tmp2;
  to_basis(QL_.data(), M, QR_.data(), m, n, tmp1, P);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      const float s = dL[i] * dR[j];
      P[i * n + j] *= s / (1.0f + s * damping);
    }
  from_basis(QL_.data(), P, QR_.data(), m, n, tmp1, direction_data());

  // Statistics, all from the current basis and estimates.
  float* C = tmp1;   // Q_L^T G
  float* B = tmp2;   // G Q_R
  float* H = tmp3;   // Q_L^T G Q_R
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
  accumulate_left(B, m, n, b, static_cast<float>((1.0 - p_.shampoo_beta) / static_cast<double>(n)), L_.data());
  accumulate_right(C, m, n, b, static_cast<float>((1.0 - p_.shampoo_beta) / static_cast<double>(m)), R_.data());
  update_estimates(ldiag_.data(), dL_.data(), m);
  update_estimates(rdiag_.data(), dR_.data(), n);
}

}  // namespace asteria
