#pragma once
// KL-Shampoo (Lin et al. 2025, "Understanding and Improving Shampoo and SOAP via
// Kullback-Leibler Minimization", arXiv 2509.03378) on one m x n block, following the
// authors' prototype:
//   first call:  S_L = (1-b)/n G G^T, S_R = (1-b)/m G^T G; Q_L, Q_R = their eigenbases
//                (descending); eigenvalue estimates lambda = init_factor; no update.
//   each step t = 1, 2, ...  (d = lambda^(-1/2), per factor, from the estimates):
//     M <- b1 M + (1-b1) G
//     D  = Q_L [ (Q_L^T M Q_R) * s / (1 + s eps) ] Q_R^T,   s_ij = d_L,i d_R,j
//          i.e. D ~ S_L^(-1/2) M S_R^(-1/2)
//     S_L <- b S_L + (1-b)/n G S_R^-1 G^T,  S_R <- b S_R + (1-b)/m G^T S_L^-1 G
//          with S^-1 = Q diag(d^2) Q^T (the current basis and estimates)
//     lambda_L <- b lambda_L + (1-b) diag(Q_L^T G S_R^-1 G^T Q_L) / n, lambda_R likewise;
//          d = lambda^(-1/2), capped at max(10, min(dim, kl_max_clamp))
//     if t % F == 0: Q <- qr(S Q) (one power step, no re-sorting; estimates kept)
// b = shampoo_beta. No bias correction; decoupled weight decay by the optimizer.
#include "optim/eigenbasis.hpp"

namespace asteria {

class KLShampooBlock final : public EigenbasisBlock {
 public:
  KLShampooBlock(std::string name, int64_t rows, int64_t cols, const PreconditionerParams& p,
                 bool own_memory = true, const BlockBackend& backend = host_block_backend());

 private:
  void update(const float* G) override;
  void initialized() override;
  void update_estimates(const double* diag, float* d, int64_t dim) const;   // host memory
  StateTensor &M_ = state(4), &dL_ = state(5), &dR_ = state(6);
  std::vector<double> ldiag_, rdiag_;
  std::vector<float> dl_host_, dr_host_;   // a device backend's estimates, copied for update_estimates
};

}  // namespace asteria
