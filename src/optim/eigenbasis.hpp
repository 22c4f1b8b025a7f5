#pragma once
// Pieces shared by the eigenbasis preconditioners (SOAP, KL-Shampoo): the initial eigenbasis of
// a factor, the snapshot of factors + bases into a RefreshJob, and the QR refresh of both bases.
#include <cstdint>

#include "optim/preconditioner.hpp"

namespace asteria::eigenbasis {

// Q = the eigenvectors of the d x d factor F, eigenvalues descending; identity on failure
// (the status says so).
matfn::Status initial(int64_t d, const float* F, float* Q);

// job <- (L, R, Q_L, Q_R) in fp64.
void snapshot(RefreshJob& job, int64_t m, int64_t n, const float* L, const float* R, const float* QL,
              const float* QR);

// Q <- qr(F Q) on both sides (sorted by estimated eigenvalue when `sort`).
void refresh(RefreshJob& job, matfn::Workspace& ws, bool sort);

}  // namespace asteria::eigenbasis
