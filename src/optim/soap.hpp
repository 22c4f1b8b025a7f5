#pragma once
// SOAP (Vyas et al. 2024, "SOAP: Improving and Stabilizing Shampoo using Adam") on one block:
// Adam run in the eigenbasis (Q_L, Q_R) of Shampoo's factors. Step counting as in the authors'
// implementation:
//   first call:  L = (1-b) G G^T, R = (1-b) G^T G; Q_L, Q_R = eigenbases (eigenvalues
//                descending); no update, not counted.
//   each step t = 1, 2, ...:
//     G' = Q_L^T G Q_R;  M <- b1 M + (1-b1) G';  V <- b2 V + (1-b2) G'^2   (M, V in the basis)
//     D  = Q_L (M / (sqrt(V) + eps)) Q_R^T * sqrt(1-b2^t) / (1-b1^t)
//     L <- b L + (1-b) G G^T, R likewise                                  (b = shampoo_beta)
//     if t % F == 0 (after the update): Q <- qr(L Q) with Q's columns first re-sorted by the
//       estimated eigenvalues diag(Q^T L Q), descending; V is permuted with them and M is
//       rotated into the new basis, so it stays the same moment in the original space.
#include "optim/eigenbasis.hpp"

namespace asteria {

class SoapBlock final : public EigenbasisBlock {
 public:
  SoapBlock(std::string name, int64_t rows, int64_t cols, const PreconditionerParams& p, bool own_memory = true,
            const BlockBackend& backend = host_block_backend());

  // For tests: the moments in the basis.
  const float* first_moment() const { return M_.data(); }
  const float* second_moment() const { return V_.data(); }

 private:
  void update(const float* G) override;
  void install(const RefreshJob& job) override;
  StateTensor &M_ = state(4), &V_ = state(5);
};

}  // namespace asteria
