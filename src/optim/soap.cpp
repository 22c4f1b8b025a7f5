#include "optim/soap.hpp"

#include <cmath>

#include "optim/block_math.hpp"

namespace asteria {

using namespace blockmath;

namespace {

// The descending eigenbasis of a float factor; identity when the decomposition fails.
matfn::Status initial_basis(int64_t d, const float* F, float* Q) {
  static thread_local matfn::Workspace ws;
  static thread_local std::vector<double> a, q;
  a.resize(d * d);
  q.resize(d * d);
  to_double(d * d, F, a.data());
  matfn::Status s = matfn::eigenbasis_descending(static_cast<int>(d), a.data(), q.data(), ws);
  if (s == matfn::Status::Ok) {
    to_float(d * d, q.data(), Q);
  } else {
    for (int64_t i = 0; i < d * d; ++i) Q[i] = (i / d == i % d) ? 1.0f : 0.0f;
  }
  return s;
}

}  // namespace

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
  status_only.status = initial_basis(m, L_.data(), QL_.data());
  if (status_only.status == matfn::Status::Ok) status_only.status = initial_basis(n, R_.data(), QR_.data());
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

bool SoapBlock::refresh_due() const { return has_direction_ && t_ % p_.precondition_frequency == 0; }

void SoapBlock::snapshot(RefreshJob& job) const {
  const int64_t m = rows_, n = cols_;
  job.rows = m;
  job.cols = n;
  job.left.resize(m * m);
  job.right.resize(n * n);
  job.left_basis.resize(m * m);
  job.right_basis.resize(n * n);
  to_double(m * m, L_.data(), job.left.data());
  to_double(n * n, R_.data(), job.right.data());
  to_double(m * m, QL_.data(), job.left_basis.data());
  to_double(n * n, QR_.data(), job.right_basis.data());
}

void SoapBlock::compute_refresh(RefreshJob& job, matfn::Workspace& ws) const {
  const int m = static_cast<int>(job.rows), n = static_cast<int>(job.cols);
  job.status = matfn::qr_refresh(m, job.left.data(), job.left_basis.data(), job.left_perm, ws, true);
  if (job.status == matfn::Status::Ok)
    job.status = matfn::qr_refresh(n, job.right.data(), job.right_basis.data(), job.right_perm, ws, true);
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
