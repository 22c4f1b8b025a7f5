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
#include "optim/preconditioner.hpp"

namespace asteria {

class SoapBlock final : public BlockPreconditioner {
 public:
  SoapBlock(std::string name, int64_t rows, int64_t cols, const PreconditionerParams& p);
  void before_refresh(const float* G) override;
  void snapshot(RefreshJob& job) const override;
  void compute_refresh(RefreshJob& job, matfn::Workspace& ws) const override;
  void after_refresh(const float*) override {}
  bool has_direction() const override { return has_direction_; }
  PreconditionerBytes state_bytes() const override;

  // For tests: the basis and the moments in it.
  const float* left_basis() const { return QL_.data(); }
  const float* right_basis() const { return QR_.data(); }
  const float* first_moment() const { return M_.data(); }
  const float* second_moment() const { return V_.data(); }
  int64_t steps() const { return t_; }

 private:
  void install(const RefreshJob& job) override;
  void initialize(const float* G);
  Buffer<float> L_, R_, QL_, QR_, M_, V_, tmp1_, tmp2_;
  int64_t t_ = 0;
  bool initialized_ = false;
  bool has_direction_ = false;
};

}  // namespace asteria
