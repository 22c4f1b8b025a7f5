#pragma once
// Stateless matrix functions of the second-order optimizers, in fp64 over LAPACK.
// All matrices are n x n, row-major, symmetric where stated. Every function returns a status
// instead of throwing: the caller (a preconditioner) decides to keep its previous result,
// count the failure and eventually stop with a message naming the block.
#include <cstdint>
#include <vector>

namespace asteria::matfn {

enum class Status { Ok, NonFinite, NotConverged, NotPositive, LapackError };
const char* to_string(Status s);

// Scratch memory reused across calls (no allocation once sized).
struct Workspace {
  std::vector<double> a, b, c, d, w;
  std::vector<int> iwork;
  void reserve(int n);
};

// A = V diag(w) V^T with ascending eigenvalues w; column j of V (V[i*n + j]) is the j-th
// eigenvector. dsyevd.
Status eigh(int n, const double* A, double* w, double* V, Workspace& ws);

// (A + eps I)^(-1/p) through eigh: eigenvalues lambda + eps, clamped below at eps (roundoff can
// make them slightly negative). eps = 0 requires A positive definite (else NotPositive).
Status inverse_root_eigh(int n, const double* A, double p, double eps, double* out, Workspace& ws);

// The same root by the coupled Newton iteration (Guo & Higham 2006): X0 = z^(1/p) I, M0 = z A
// with z = (p+1) / (2 ||A||_F); T = ((p+1) I - M) / p; X <- X T; M <- T^p M, until
// max|M - I| <= tol. p must be a positive integer. Needs only GEMMs.
Status inverse_root_newton(int n, const double* A, int p, double eps, double* out, Workspace& ws,
                           int max_iters = 100, double tol = 1e-12);

// One refresh of an eigenbasis estimate Q of a symmetric L (SOAP, Vyas et al. 2024):
// with `sort`, the estimated eigenvalues d = diag(Q^T L Q) re-sort the columns of Q descending
// (perm[k] = old column index of new column k; identity without `sort`); then Q <- qr(L Q)
// (dgeqrf + dorgqr), one power step. On failure Q is left unchanged.
Status qr_refresh(int n, const double* L, double* Q, std::vector<int>& perm, Workspace& ws,
                  bool sort = true);

// The eigenbasis of L, columns sorted by eigenvalue descending (SOAP's initial basis).
Status eigenbasis_descending(int n, const double* L, double* Q, Workspace& ws);

bool all_finite(int64_t count, const double* x);

}  // namespace asteria::matfn
