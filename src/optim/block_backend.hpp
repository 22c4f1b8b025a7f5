#pragma once
// Where a second-order optimizer's block state lives and where its per-step work runs: the host
// (host_block_backend(): the reference, the CPU run's code) or a CUDA device
// (cuda_block_backend(): the state tensors bound to device memory, the work on the calling
// thread's current stream, as the model's ops do on runtime.backend cuda).
//
// The preconditioners (preconditioner.hpp) and the optimizer over them (second_order.hpp) keep
// their logic (counters, schedule, refresh jobs, failure rules) in one place and call a backend
// for everything that touches state memory. A refresh's computation stays on the host either
// way: a job is fp64 host memory (snapshot() reads the state through the backend, publish()
// writes it back), so the host workers of runtime.mode asteria compute for a device run exactly
// what they compute for a CPU run.
//
// Contracts of the device ops: pointers are the backend's memory; everything is queued on the
// calling thread's current stream and ordered there, except what returns a value or fills host
// memory, which returns when the value is there. Scratch is per thread (thread_scratch.hpp's
// contract) in the backend's memory.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "optim/adamw_update.hpp"
#include "optim/matrix_functions.hpp"

namespace asteria {

class BlockBackend {
 public:
  virtual ~BlockBackend() = default;
  // Whether the memory is a device's: host code may not touch it.
  virtual bool on_device() const = 0;

  // Scratch slots, each the calling thread's: 0-3 the algorithms' temporaries (thread_scratch.hpp),
  // then the dense gradient block (a device backend's; the host's is the optimizer's thread
  // scratch) and the update direction.
  static constexpr int kGradientSlot = 4, kDirectionSlot = 5, kSlots = 6;
  virtual float* scratch(int slot, size_t count) const = 0;

  // Host <-> backend copies (host: memcpy), and fp64 host arrays in and out (the refresh jobs).
  // to_host_double is a snapshot's copy: it follows what the calling thread's stream queued, and
  // the CUDA backend runs it on a low-priority staging stream through pinned memory, so that the
  // shadow pipeline's snapshots do not hold up the training stream.
  virtual void to_host(float* host, const float* x, size_t n) const = 0;
  virtual void from_host(float* x, const float* host, size_t n) const = 0;
  virtual void to_host_double(const float* x, size_t n, double* host) const = 0;
  virtual void from_host_double(float* x, const double* host, size_t n) const = 0;
  virtual void copy(float* dst, const float* src, size_t n) const = 0;   // within the backend's memory

  // dst (rows x cols, dense) = scale * src (rows x cols with row stride ld); whether every
  // value of dst is finite.
  virtual bool scaled_copy_finite(const float* src, int64_t ld, int64_t rows, int64_t cols, float scale,
                                  float* dst) const = 0;
  virtual void scale(float* x, size_t n, float s) const = 0;

  // C (m x n) = alpha op(A) op(B) + beta C, contiguous row-major (blockmath::mul).
  virtual void mul(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* A, const float* B,
                   float beta, float* C) const = 0;
  // blockmath's helpers (block_math.hpp): factor statistics, basis changes, SOAP's moments.
  virtual void accumulate_left(const float* G, int64_t m, int64_t n, float beta, float scale, float* L) const = 0;
  virtual void accumulate_right(const float* G, int64_t m, int64_t n, float beta, float scale, float* R) const = 0;
  virtual void to_basis(const float* QL, const float* X, const float* QR, int64_t m, int64_t n, float* tmp,
                        float* out) const = 0;
  virtual void from_basis(const float* QL, const float* X, const float* QR, int64_t m, int64_t n, float* tmp,
                          float* out) const = 0;
  virtual void soap_moments(float* M, float* V, float* G, int64_t mn, float b1, float b2, float a1, float a2,
                            float eps) const = 0;
  // x = b x + a y (an EMA; KL-Shampoo's first moment).
  virtual void ema(float* x, const float* y, size_t n, float b, float a) const = 0;
  // Shampoo: M = b1 M + m_add G;  V = b2 V + v_add G^2.
  virtual void shampoo_moments(float* M, float* V, const float* G, int64_t mn, float b1, float b2, float m_add,
                               float v_add) const = 0;
  // Shampoo's grafting direction A = M inv_bc1 / (sqrt(V inv_bc2) + eps) (graft) or M inv_bc1;
  // returns sum A^2 in fp64. The host sums in index order, a device in its own fixed order.
  virtual double adam_direction(const float* M, const float* V, int64_t mn, float inv_bc1, float inv_bc2, float eps,
                                bool graft, float* A) const = 0;
  virtual double sum_of_squares(const float* x, int64_t n) const = 0;   // fp64, as adam_direction
  // KL-Shampoo: P_ij *= s / (1 + s damping) with s = dL_i dR_j.
  virtual void kl_damp(float* P, const float* dL, const float* dR, int64_t m, int64_t n, float damping) const = 0;
  // KL-Shampoo's eigenvalue statistics into host arrays, fp64: ldiag_i = sum_j (H_ij dR_j)^2 over
  // j ascending, rdiag_j = sum_i (H_ij dL_i)^2 over i ascending (the same order on a device: a
  // thread per row / column).
  virtual void kl_factor_diagonals(const float* H, const float* dL, const float* dR, int64_t m, int64_t n,
                                   double* ldiag, double* rdiag) const = 0;
  // X (m x n): X_ij *= s_j (scale_columns), X_ij *= s_i (scale_rows).
  virtual void scale_columns(float* X, const float* s, int64_t m, int64_t n) const = 0;
  virtual void scale_rows(float* X, const float* s, int64_t m, int64_t n) const = 0;

  // Q = the eigenvectors of the d x d symmetric F, eigenvalues descending (SOAP's and
  // KL-Shampoo's first basis); identity when it fails (the status says why). The host computes
  // in `precision` (fp32 retried in fp64 on failure); the CUDA backend with cuSOLVER on the
  // device in the same precision (a host eigh of every block at the first step would take
  // minutes at OLMo-1B's size), and with the host's rule on a copy when that fails.
  virtual matfn::Status initial_eigenbasis(int64_t d, const float* F, float* Q, matfn::Precision precision) const = 0;
  // A refresh's matrix functions computed by the backend itself on fp64 host arrays (their
  // contracts: matrix_functions.hpp qr_refresh, inverse_root_eigh), in `precision`
  // (optim.refresh_dtype: for float32 the inputs are rounded to fp32 and the result widened, as
  // the host's functions do): true when it computed (the status is then the function's), false
  // when it has none (the host's then run). The host backend has none; the CUDA backend computes
  // with cuSOLVER on the device, for native mode's inline refreshes (the shadow pipeline's host
  // workers never call these).
  virtual bool qr_refresh(matfn::Precision /*precision*/, int /*n*/, const double* /*L*/, double* /*Q*/,
                          std::vector<int>& /*perm*/, bool /*sort*/, matfn::Status& /*status*/) const {
    return false;
  }
  virtual bool inverse_root(matfn::Precision /*precision*/, int /*n*/, const double* /*A*/, double /*p*/,
                            double /*eps*/, double* /*out*/, matfn::Status& /*status*/) const {
    return false;
  }
  // From now on the calling thread's device work (qr_refresh, inverse_root and their copies)
  // runs on a low-priority stream of the thread's own, so that it fills the device's gaps
  // around the training stream's kernels instead of queuing behind them (the shadow pipeline's
  // device lane workers). Nothing on the host backend.
  virtual void use_background_stream() const {}
  // out[i][j] = X[row_perm[i]][col_perm[j]] (m x n; out and X distinct).
  virtual void permute(const float* X, const std::vector<int>& row_perm, const std::vector<int>& col_perm, int64_t m,
                       int64_t n, float* out) const = 0;

  // The decoupled-weight-decay update of a block (rows x cols of W with row stride ld; c the
  // compensation at the same place, or null), second_order.hpp's two orders:
  //   decay_first (Shampoo):  W <- W - (lr * D + lr_wd * W)
  //   else (SOAP, KL):        W' = W - lr * D;  W <- W' - lr_wd * W'
  virtual void apply_update(float* w, float* c, int64_t ld, const float* D, int64_t rows, int64_t cols, float lr,
                            float lr_wd, bool decay_first) const = 0;
  // adamw_update.hpp's op (the 1-D parameters' AdamW).
  virtual void adamw_update(float* w, float* c, float* m, float* v, const float* g, float grad_scale, size_t n,
                            const AdamWCoefficients& k) const = 0;
};

const BlockBackend& host_block_backend();
// Throws in a build without CUDA (optim/cuda/block_backend.cu).
const BlockBackend& cuda_block_backend();

}  // namespace asteria
