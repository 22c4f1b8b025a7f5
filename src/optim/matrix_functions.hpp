#pragma once
// Stateless matrix functions of the second-order optimizers over LAPACK, in fp64 or fp32.
// Each function is a template over the element type Real (float or double, explicitly
// instantiated in matrix_functions.cpp; float calls the s* LAPACK / BLAS routines, double the d*
// ones). The Precision overloads at the end take fp64 data and compute in the chosen precision
// (optim.refresh_dtype).
// All matrices are n x n, row-major, symmetric where stated. Every function returns a status
// instead of throwing: the caller (a preconditioner) decides to keep its previous result,
// count the failure and eventually stop with a message naming the block.
#include <cstdint>
#include <type_traits>
#include <vector>

namespace asteria::matfn {

enum class Status { Ok, NonFinite, NotConverged, NotPositive, LapackError };
const char* to_string(Status s);

// The precision a refresh is computed in.
enum class Precision { Float64, Float32 };
// optim.refresh_dtype's spelling: float64, float32.
inline const char* to_string(Precision p) { return p == Precision::Float32 ? "float32" : "float64"; }

// Scratch memory of one element type.
template <class Real>
struct Scratch {
  std::vector<Real> a, b, c, d, w;
  // LAPACK's: the column-major copy of a row-major matrix (syevd) and its work arrays (lapack_int
  // is int here).
  std::vector<Real> lapack_a, lapack_work;
  std::vector<int> lapack_iwork;
  void reserve(int n);
};

// What one part of a refresh computed in parts (qr_refresh_part, inverse_root_eigh_part) hands
// the next, in the precision it computes in: an n x n matrix m (qr_refresh_part's column-major,
// its columns padded for LAPACK) and an n-vector v, and whether fp32 failed (the last part then
// computes the whole function in fp64).
struct PartCarry {
  std::vector<float> m32, v32;
  std::vector<double> m64, v64;
  bool fp32_failed = false;
};

// Scratch memory reused across calls (no allocation once sized, LAPACK's work arrays included; a
// precision never used allocates nothing).
struct Workspace {
  Scratch<double> f64;
  Scratch<float> f32;
  std::vector<float> in, out;   // fp64 data rounded to fp32 (the Precision overloads)
  std::vector<double> sums;     // fp64 accumulators, one per column
  PartCarry carry;              // the one-call Precision overloads' parts
  template <class Real>
  Scratch<Real>& get() {
    if constexpr (std::is_same_v<Real, float>) return f32;
    else return f64;
  }
};

// A = V diag(w) V^T with ascending eigenvalues w; column j of V (V[i*n + j]) is the j-th
// eigenvector. dsyevd / ssyevd.
template <class Real>
Status eigh(int n, const Real* A, Real* w, Real* V, Workspace& ws);

// (A + eps I)^(-1/p) through eigh: eigenvalues lambda + eps, clamped below at eps (roundoff can
// make them slightly negative, by up to about n * epsilon(Real) * max|eigenvalue|: in fp32 an eps
// well below that scale lets roundoff become large root entries). The shift, clamp and power
// are evaluated in fp64 for both types. eps = 0 requires A numerically positive definite: an
// eigenvalue below n * epsilon(Real) * max|eigenvalue| gives NotPositive.
template <class Real>
Status inverse_root_eigh(int n, const Real* A, double p, double eps, Real* out, Workspace& ws);

// inverse_root_eigh's rule on A's eigenvalues w, in place: w[j] <- mu_j^(-1/(2p)) with
// mu_j = max(w[j] + eps, eps) (the root is then (V diag(w)) (V diag(w))^T), or NotPositive
// without eps when some w[j] is within roundoff of zero. The CPU and CUDA roots both call it.
template <class Real>
Status inverse_root_scales(int n, Real* w, double p, double eps);

// The default convergence tolerance of inverse_root_newton: 1e-12 in fp64, 1e-6 in fp32 (the
// default of Distributed Shampoo's coupled Newton).
template <class Real>
constexpr double newton_tolerance() {
  return std::is_same_v<Real, float> ? 1e-6 : 1e-12;
}

// The same root by the coupled Newton iteration (Guo & Higham 2006): X0 = z^(1/p) I, M0 = z A
// with z = (p+1) / (2 ||A||_F); T = ((p+1) I - M) / p; X <- X T; M <- T^p M, until
// max|M - I| <= tol. p must be a positive integer. Needs only GEMMs.
template <class Real>
Status inverse_root_newton(int n, const Real* A, int p, double eps, Real* out, Workspace& ws,
                           int max_iters = 100, double tol = newton_tolerance<Real>());

// One refresh of an eigenbasis estimate Q of a symmetric L (SOAP, Vyas et al. 2024):
// with `sort`, the estimated eigenvalues d = diag(Q^T L Q) re-sort the columns of Q descending
// (perm[k] = old column index of new column k; identity without `sort`); then Q <- qr(L Q)
// (geqrf + orgqr), one power step. On failure Q is left unchanged.
template <class Real>
Status qr_refresh(int n, const Real* L, Real* Q, std::vector<int>& perm, Workspace& ws, bool sort = true);

// The eigenbasis of L, columns sorted by eigenvalue descending (SOAP's initial basis).
template <class Real>
Status eigenbasis_descending(int n, const Real* L, Real* Q, Workspace& ws);

template <class Real>
bool all_finite(int64_t count, const Real* x);

// fp64 in and out, computed in `precision`: Float64 is exactly the function above; Float32
// rounds the inputs to fp32 in ws, computes in fp32 and widens the result into the fp64 output.
// When fp32 fails (an input beyond the fp32 range, an eigenvalue below fp32's singular
// threshold, no convergence, ...) the call is retried in fp64, as docs/DESIGN.md asks of a failed
// refresh: fp32 never loses a refresh that fp64 computes, and the result stays a pure function
// of the input.
Status inverse_root_eigh(Precision precision, int n, const double* A, double p, double eps, double* out,
                         Workspace& ws);
Status inverse_root_newton(Precision precision, int n, const double* A, int p, double eps, double* out,
                           Workspace& ws);
Status qr_refresh(Precision precision, int n, const double* L, double* Q, std::vector<int>& perm,
                  Workspace& ws, bool sort = true);

// The same two functions in parts, so that a refresh's work can be spread over several steps
// (runtime.shadow.lane compute): calling parts 0 .. k-1 in order, possibly on different threads
// and at different times, with the same carry and unchanged inputs, gives exactly the one-call
// result (which is computed that way). A part returning an error ends the computation.
//   qr_refresh: 0 power step L Q and re-sort, 1 geqrf, 2 orgqr (Q is written by part 2 only);
//   inverse_root_eigh: 0 eigendecomposition, 1 V diag(mu^(-1/p)) V^T (out written by part 1).
// The Workspace holds only what a part uses while it runs; it may differ between parts.
constexpr int kQrRefreshParts = 3;
constexpr int kInverseRootEighParts = 2;
Status qr_refresh_part(int part, Precision precision, int n, const double* L, double* Q, std::vector<int>& perm,
                       PartCarry& carry, Workspace& ws, bool sort = true);
Status inverse_root_eigh_part(int part, Precision precision, int n, const double* A, double p, double eps,
                              double* out, PartCarry& carry, Workspace& ws);

// Test hook: the next `count` calls of eigh fail with LapackError (failure-path tests).
void inject_eigh_failures(int count);

// The CUDA backend's eigh, inverse root and QR refresh (optim/cuda/matrix_functions.cu, cuSOLVER's
// syevd, geqrf, orgqr):
// the same contracts on device pointers (A, w, V, out), the same status rules (non-finite input
// or output, the eigenvalue clamp and singularity test of inverse_root_eigh, computed on the host
// from the eigenvalues exactly as the CPU does), on the calling thread's current stream;
// returns once the status is known. For refreshes computed on the device (runtime.mode native
// on the GPU). Builds with CUDA only.
namespace cuda {
template <class Real>
Status eigh(int n, const Real* A, Real* w, Real* V);
template <class Real>
Status inverse_root_eigh(int n, const Real* A, double p, double eps, Real* out);
// SOAP's power step and QR (qr_refresh's contract: the estimates diag(Q^T L Q) summed in fp64 in
// the CPU's order, the same stable sort on the host, geqrf + orgqr; Q unchanged on failure).
template <class Real>
Status qr_refresh(int n, const Real* L, Real* Q, std::vector<int>& perm, bool sort = true);
}  // namespace cuda

}  // namespace asteria::matfn
