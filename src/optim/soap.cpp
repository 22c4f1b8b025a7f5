#include "optim/soap.hpp"

#include <cmath>

#include "optim/block_math.hpp"
#include "optim/run_beside.hpp"

namespace asteria {

SoapBlock::SoapBlock(std::string name, int64_t rows, int64_t cols, const PreconditionerParams& p, bool own_memory,
                     const BlockBackend& backend)
    : EigenbasisBlock(name, rows, cols, p, preconditioner_state_specs(OptimizerKind::Soap, name, rows, cols), own_memory, backend,
                      /*sort=*/true, blockmath::one_minus(p.shampoo_beta), blockmath::one_minus(p.shampoo_beta)) {}

void SoapBlock::update(const float* G) {
  const BlockBackend& be = backend_;
  const int64_t m = rows_, n = cols_, mn = m * n;
  float* tmp1 = be.scratch(0, static_cast<size_t>(mn));
  float* tmp2 = be.scratch(1, static_cast<size_t>(mn));
  const float b1 = static_cast<float>(p_.beta1), b2 = static_cast<float>(p_.beta2);
  const float a1 = blockmath::one_minus(p_.beta1), a2 = blockmath::one_minus(p_.beta2);
  const float eps = static_cast<float>(p_.eps);
  const double t = static_cast<double>(t_);
  const float step_scale = static_cast<float>(std::sqrt(1.0 - std::pow(p_.beta2, t)) / (1.0 - std::pow(p_.beta1, t)));
  float* D = direction_data();
  const float b = static_cast<float>(p_.shampoo_beta), a = blockmath::one_minus(p_.shampoo_beta);
  // The direction here; the factor statistics (from G alone) beside it (run_beside.hpp).
  run_beside(
      be,
      [&] {
        float* Gp = tmp2;
        be.to_basis(QL_.data(), G, QR_.data(), m, n, tmp1, Gp);
        be.soap_moments(M_.data(), V_.data(), Gp, mn, b1, b2, a1, a2, eps);
        be.from_basis(QL_.data(), Gp, QR_.data(), m, n, tmp1, D);
        be.scale(D, static_cast<size_t>(mn), step_scale);
      },
      [&] { be.accumulate_left(G, m, n, b, a, L_.data()); }, [&] { be.accumulate_right(G, m, n, b, a, R_.data()); });
}

void SoapBlock::install(const RefreshJob& job) {
  const BlockBackend& be = backend_;
  const int64_t m = rows_, n = cols_, mn = m * n;
  float* tmp1 = be.scratch(0, static_cast<size_t>(mn));
  float* tmp2 = be.scratch(1, static_cast<size_t>(mn));
  // M back to the original space with the old basis ...
  be.from_basis(QL_.data(), M_.data(), QR_.data(), m, n, tmp1, tmp2);
  EigenbasisBlock::install(job);
  // ... and into the new one.
  be.to_basis(QL_.data(), tmp2, QR_.data(), m, n, tmp1, M_.data());
  // V follows the re-sorted columns: V_new[i][j] = V[perm_L[i]][perm_R[j]].
  be.permute(V_.data(), job.left_perm, job.right_perm, m, n, tmp1);
  be.copy(V_.data(), tmp1, static_cast<size_t>(mn));
}

}  // namespace asteria
