#include "optim/soap.hpp"

#include <cmath>

#include "optim/block_math.hpp"
#include "optim/eigenbasis.hpp"

namespace asteria {

using namespace blockmath;

SoapBlock::SoapBlock(std::string name, int64_t rows, int64_t cols, const PreconditionerParams& p)
    : BlockPreconditioner(std::move(name), rows, cols, p),
      L_(rows * rows), R_(cols * cols), QL_(rows * rows), QR_(cols * cols),
      M_(rows * cols), V_(rows * cols), tmp1_(rows * cols), tmp2_(rows * cols) {}

PreconditionerBytes SoapBlock::state_bytes() const { return preconditioner_bytes("soap", rows_, cols_); }

void SoapBlock::initialize(const float* G) {
  const int64_t m = rows_, n = cols_;
  const float b = static_cast<float>(p_.shampoo_beta);
  accumulate_left(G, m, n, 0.0f, 1.0f - b, L_.data());
  accumulate_right(G, m, n, 0.0f, 1.0f - b, R_.data());
  RefreshJob status_only;
  status_only.status = eigenbasis::initial(m, L_.data(), QL_.data());
  const matfn::Status right = eigenbasis::initial(n, R_.data(), QR_.data());  // identity on failure
  if (status_only.status == matfn::Status::Ok) status_only.status = right;
  if (status_only.status != matfn::Status::Ok) publish(status_only);  // counted like any failure
  initialized_ = true;
}

void SoapBlock::before_refresh(const float* G) {
  if (!initialized_) {
    initialize(G);
    has_direction_ = false;
    return;
  }
  has_direction_ = true;
  ++t_;
  const int64_t m = rows_, n = cols_, mn = m * n;
  const float b1 = static_cast<float>(p_.beta1), b2 = static_cast<float>(p_.beta2);
  const float eps = static_cast<float>(p_.eps);
  float* M = M_.data();
  float* V = V_.data();
  float* Gp = tmp2_.data();
  to_basis(QL_.data(), G, QR_.data(), m, n, tmp1_.data(), Gp);
  for (int64_t i = 0; i < mn; ++i) {
    M[i] = b1 * M[i] + (1.0f - b1) * Gp[i];
    V[i] = b2 * V[i] + (1.0f - b2) * Gp[i] * Gp[i];
    Gp[i] = M[i] / (std::sqrt(V[i]) + eps);
  }
  const double t = static_cast<double>(t_);
  const float step_scale = static_cast<float>(std::sqrt(1.0 - std::pow(p_.beta2, t)) / (1.0 - std::pow(p_.beta1, t)));
  from_basis(QL_.data(), Gp, QR_.data(), m, n, tmp1_.data(), direction_.data());
  float* D = direction_.data();
  for (int64_t i = 0; i < mn; ++i) D[i] *= step_scale;
  const float b = static_cast<float>(p_.shampoo_beta);
  accumulate_left(G, m, n, b, 1.0f - b, L_.data());
  accumulate_right(G, m, n, b, 1.0f - b, R_.data());
}

void SoapBlock::snapshot(RefreshJob& job) const {
  eigenbasis::snapshot(job, rows_, cols_, L_.data(), R_.data(), QL_.data(), QR_.data());
}

void SoapBlock::compute_refresh(RefreshJob& job, matfn::Workspace& ws) const {
  eigenbasis::refresh(job, ws, /*sort=*/true);
}

void SoapBlock::install(const RefreshJob& job) {
  const int64_t m = rows_, n = cols_, mn = m * n;
  // M back to the original space with the old basis ...
  from_basis(QL_.data(), M_.data(), QR_.data(), m, n, tmp1_.data(), tmp2_.data());
  to_float(m * m, job.left_basis.data(), QL_.data());
  to_float(n * n, job.right_basis.data(), QR_.data());
  // ... and into the new one.
  to_basis(QL_.data(), tmp2_.data(), QR_.data(), m, n, tmp1_.data(), M_.data());
  // V follows the re-sorted columns: V_new[i][j] = V[perm_L[i]][perm_R[j]].
  float* Vn = tmp1_.data();
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) Vn[i * n + j] = V_[job.left_perm[i] * n + job.right_perm[j]];
  std::copy(Vn, Vn + mn, V_.data());
}

}  // namespace asteria
