#include "optim/soap.hpp"

#include <cmath>

#include "optim/block_math.hpp"
#include "optim/thread_scratch.hpp"

namespace asteria {

using namespace blockmath;

SoapBlock::SoapBlock(std::string name, int64_t rows, int64_t cols, const PreconditionerParams& p, bool own_memory)
    : EigenbasisBlock(name, rows, cols, p, preconditioner_state_specs("soap", name, rows, cols), own_memory,
                      /*sort=*/true, one_minus(p.shampoo_beta), one_minus(p.shampoo_beta)) {}

void SoapBlock::update(const float* G) {
  const int64_t m = rows_, n = cols_, mn = m * n;
  float* tmp1 = thread_scratch(0, static_cast<size_t>(mn));
  float* tmp2 = thread_scratch(1, static_cast<size_t>(mn));
  const float b1 = static_cast<float>(p_.beta1), b2 = static_cast<float>(p_.beta2);
  const float a1 = one_minus(p_.beta1), a2 = one_minus(p_.beta2);
  const float eps = static_cast<float>(p_.eps);
  float* M = M_.data();
  float* V = V_.data();
  float* Gp = tmp2;
  to_basis(QL_.data(), G, QR_.data(), m, n, tmp1, Gp);
  soap_moments(M, V, Gp, mn, b1, b2, a1, a2, eps);
  const double t = static_cast<double>(t_);
  const float step_scale = static_cast<float>(std::sqrt(1.0 - std::pow(p_.beta2, t)) / (1.0 - std::pow(p_.beta1, t)));
  from_basis(QL_.data(), Gp, QR_.data(), m, n, tmp1, direction_.data());
  float* D = direction_.data();
  for (int64_t i = 0; i < mn; ++i) D[i] *= step_scale;
  const float b = static_cast<float>(p_.shampoo_beta), a = one_minus(p_.shampoo_beta);
  accumulate_left(G, m, n, b, a, L_.data());
  accumulate_right(G, m, n, b, a, R_.data());
}

void SoapBlock::install(const RefreshJob& job) {
  const int64_t m = rows_, n = cols_, mn = m * n;
  float* tmp1 = thread_scratch(0, static_cast<size_t>(mn));
  float* tmp2 = thread_scratch(1, static_cast<size_t>(mn));
  // M back to the original space with the old basis ...
  from_basis(QL_.data(), M_.data(), QR_.data(), m, n, tmp1, tmp2);
  EigenbasisBlock::install(job);
  // ... and into the new one.
  to_basis(QL_.data(), tmp2, QR_.data(), m, n, tmp1, M_.data());
  // V follows the re-sorted columns: V_new[i][j] = V[perm_L[i]][perm_R[j]].
  float* Vn = tmp1;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) Vn[i * n + j] = V_[job.left_perm[i] * n + job.right_perm[j]];
  std::copy(Vn, Vn + mn, V_.data());
}

}  // namespace asteria
