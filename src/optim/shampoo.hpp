#pragma once
// Shampoo (Gupta et al. 2018) on one block, in the form of Meta's Distributed Shampoo:
//   L <- b L + (1-b) G G^T,  R <- b R + (1-b) G^T G      (b = shampoo_beta; b = 1: plain sums)
//   M <- b1 M + (1-b1) G                                 (first moment)
//   at start_preconditioning_step and at the multiples of F after it (refresh_schedule.hpp):
//     Linv = (L/(1-b^t) + root_eps I)^(-1/4), Rinv likewise  (bias-corrected factors)
//   D = Linv M_hat Rinv, rescaled to the norm of the Adam direction M_hat / (sqrt(v_hat) + eps)
//   by |A| / (|D| + 1e-16), as the reference does
//   (grafting; v with beta2, or a plain sum when beta2 = 1). Before the first roots: D = the
//   Adam direction (or M_hat without grafting).
#include "optim/preconditioner.hpp"

namespace asteria {

class ShampooBlock final : public BlockPreconditioner {
 public:
  ShampooBlock(std::string name, int64_t rows, int64_t cols, const PreconditionerParams& p,
               bool own_memory = true, const BlockBackend& backend = host_block_backend());
  void before_refresh(const float* G) override;
  void snapshot(RefreshJob& job) const override;
  int refresh_parts() const override { return 2 * matfn::kInverseRootEighParts; }
  void after_refresh(const float* G) override;
  bool has_direction() const override { return true; }
  void snapshot_installed(RefreshJob& job) const override;
  double refresh_change(const RefreshJob& job) const override;

 private:
  void install(const RefreshJob& job) override;
  std::vector<int64_t> algorithm_counters() const override { return {t_, have_roots_}; }
  void restore_algorithm_counters(const std::vector<int64_t>& c) override {
    t_ = c[0];
    have_roots_ = c[1] != 0;
  }
  void refresh_part(RefreshJob& job, int part, matfn::Workspace& ws) const override;
  bool refresh_on_backend(RefreshJob& job) const override;
  StateTensor &L_ = state(0), &R_ = state(1), &Linv_ = state(2), &Rinv_ = state(3), &M_ = state(4), &V_ = state(5);
  int64_t t_ = 0;
  bool have_roots_ = false;
};

}  // namespace asteria
