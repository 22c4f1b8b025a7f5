#pragma once
// One interface over the Kronecker-factored preconditioners of a matrix block (Shampoo, SOAP,
// KL-Shampoo), after Meta's Distributed Shampoo: small variants behind one contract.
//
// An optimizer step of a block, given its (clipped) gradient G (rows x cols):
//
//   before_refresh(G)   the work the algorithm does before its refresh point
//   -- refresh point --  when due (refresh_schedule.hpp): snapshot -> compute -> publish
//   after_refresh(G)    the rest; afterwards direction() holds the update D (rows x cols) when
//                       has_direction() (SOAP and KL-Shampoo only initialize on their first call)
//
// and the optimizer applies W <- W - lr * D with decoupled weight decay (second_order.hpp).
// Shampoo's refresh point lies between its statistics and its direction (roots computed at
// step t precondition step t); SOAP's and KL-Shampoo's at the end of the step (a refreshed
// basis is used from the next step), as in the authors' implementations.
//
// The refresh is split so that it can run elsewhere (runtime.mode asteria, a later issue):
// snapshot() copies everything the refresh reads into a RefreshJob, compute_refresh() is a pure
// function of the job (it may run on any thread), publish() installs the result. In native mode
// the three run back to back at the refresh point.
// A failed refresh (non-finite input, eigh failure) keeps the previous roots/basis and is
// counted; more than max_failures in a row throws asteria::Error naming the block.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/buffer.hpp"
#include "optim/block_backend.hpp"
#include "optim/matrix_functions.hpp"
#include "optim/optim_config.hpp"
#include "optim/state_tensor.hpp"

namespace asteria {

struct PreconditionerParams {
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;               // Adam-style denominators (grafting, SOAP, KL damping)
  double shampoo_beta = 0.999;     // factor EMA (resolved: never negative here); 1 = plain sums
  double root_eps = 1e-12;         // Shampoo: (L + root_eps I)^(-1/4)
  int64_t precondition_frequency = 10;
  int64_t start_preconditioning_step = 1;
  RootMethod root_method = RootMethod::Eigh;
  Grafting grafting = Grafting::Adam;
  int max_failures = 3;
  double kl_init_factor = 0.1;     // KL-Shampoo: initial eigenvalue estimate
  double kl_max_clamp = 4000;      // KL-Shampoo: cap of the inverse-sqrt eigenvalue estimates
  // Precision of the refresh computation (Shampoo's inverse roots; SOAP's and KL-Shampoo's QR
  // power step and initial eigenbasis). The job's buffers stay fp64 either way.
  matfn::Precision refresh_dtype = matfn::Precision::Float64;
};

// Everything a refresh reads and writes, detached from the block. fp64 whatever the refresh
// precision: with refresh_dtype fp32 the matrix functions round to fp32 in the Workspace.
struct RefreshJob {
  int64_t rows = 0, cols = 0;
  std::vector<double> left, right;               // factors (inputs)
  std::vector<double> left_basis, right_basis;   // bases: inputs, refreshed in place (SOAP, KL)
  std::vector<double> left_root, right_root;     // inverse roots (Shampoo outputs)
  std::vector<int> left_perm, right_perm;        // SOAP: new column k = old column perm[k]
  // continue_from: the input bases' permutation of the installed ones (empty: identity); a
  // refresh composes its perms with it, so that they always permute the installed columns.
  std::vector<int> base_left_perm, base_right_perm;
  matfn::PartCarry left_carry, right_carry;      // between the parts of a refresh in parts
  bool left_newton_done = false, right_newton_done = false;   // Shampoo, root_method newton
  matfn::Status status = matfn::Status::Ok;
  // runtime.coherence.tolerance: the roots or bases installed when the job was snapshotted
  // (snapshot_installed), and the refresh's change from them (refresh_change; -1: not computed).
  std::vector<float> installed_left, installed_right;
  double change = -1;
};

// The side of a job a refresh part works on: parts 0 .. per_side - 1 are the left factor's
// (rows x rows), the next per_side the right's (cols x cols); stage is the part within its side.
struct RefreshSide {
  int stage, n;
  const double* factor;
  std::vector<double>& basis;
  std::vector<double>& root;
  std::vector<int>& perm;
  matfn::PartCarry& carry;
  bool& newton_done;
};
inline RefreshSide refresh_side(RefreshJob& job, int part, int per_side) {
  if (part < per_side)
    return {part, static_cast<int>(job.rows), job.left.data(), job.left_basis, job.left_root, job.left_perm,
            job.left_carry, job.left_newton_done};
  return {part - per_side, static_cast<int>(job.cols), job.right.data(), job.right_basis, job.right_root,
          job.right_perm, job.right_carry, job.right_newton_done};
}

// The parts of a block's refresh (BlockPreconditioner::compute_refresh_part), left factor's then
// right's, each with its cost: single-thread fp32 times at n = 1024 relative to n^3, so that a
// block's parts sum to rows^3 + cols^3 (refresh_cost):
//   soap, kl_shampoo  per side QR refresh: power step 0.37, geqrf 0.31, orgqr 0.32 (bench_refresh)
//   shampoo           per side inverse root: eigendecomposition 0.86, V diag V^T 0.14
// (eigh-based; with root_method newton the first part does all of a converged root's work).
std::vector<double> refresh_part_costs(OptimizerKind algorithm, int64_t rows, int64_t cols);

// The matrix-multiply FLOPs of one block's step outside its refreshes (every step), m = rows,
// n = cols: 2 m n k per product, m^2 n for a factor's symmetric rank-k update (one triangle,
// ssyrk), the elementwise work not counted:
//   soap        factors L += G G^T, R += G^T G; G into the eigenbasis and the direction back
//               (two products each):                                  5 m^2 n + 5 m n^2
//   shampoo     factors; direction Linv M Rinv:                       3 m^2 n + 3 m n^2
//   kl_shampoo  the momentum into the basis and back; Q_L^T G, G Q_R, (Q_L^T G) Q_R; factors
//               from the scaled G Q_R and Q_L^T G:                     7 m^2 n + 9 m n^2
// For the benchmarks' FLOP rate of optim_s (run_info.json's optimizer_step_matmul_flops).
double step_matmul_flops(OptimizerKind algorithm, int64_t rows, int64_t cols);
// Floats of one refresh's result as a replica receives it (runtime/coherence.hpp): the inverse
// roots (Shampoo), or the bases with their per-direction values (SOAP, KL-Shampoo).
size_t refresh_payload_floats(OptimizerKind algorithm, int64_t rows, int64_t cols);

// Bytes one block keeps, by kind (for reports and --dry-run).
struct PreconditionerBytes {
  size_t factors = 0;    // L, R (hot: updated every step)
  size_t roots = 0;      // inverse roots or eigenbases (warm: read every step, written every F)
  size_t moments = 0;    // first/second moments, grafting state, eigenvalue estimates (hot)
  size_t total() const { return factors + roots + moments; }
};

// The state tensors of one block of an algorithm, in the order BlockPreconditioner::states()
// returns them; names are "<block> / <tensor>". The one description used by the blocks, the
// tiered state manager and --dry-run.
std::vector<StateSpec> preconditioner_state_specs(OptimizerKind algorithm, const std::string& block,
                                                  int64_t rows, int64_t cols);

class BlockPreconditioner {
 public:
  // own_memory: bind the state to memory of its own; else whoever calls states() binds it (to
  // the backend's memory: a device backend's state is always bound by its owner).
  BlockPreconditioner(std::string name, int64_t rows, int64_t cols, const PreconditionerParams& p,
                      std::vector<StateSpec> states, bool own_memory, const BlockBackend& backend);
  virtual ~BlockPreconditioner() = default;

  const std::string& name() const { return name_; }
  int64_t rows() const { return rows_; }
  int64_t cols() const { return cols_; }

  // G: rows x cols, row-major, dense (already multiplied by the clip scale).
  virtual void before_refresh(const float* G) = 0;
  virtual void snapshot(RefreshJob& job) const = 0;
  // compute_refresh_part(job, k) for k = 0 .. refresh_parts() - 1, in order.
  void compute_refresh(RefreshJob& job, matfn::Workspace& ws) const;
  // The refresh computed where the block's state lives (native mode's inline refresh): by the
  // backend's own solvers when it has them (cuSOLVER on the device), else compute_refresh.
  void compute_refresh_in_place(RefreshJob& job, matfn::Workspace& ws) const;
  // The refresh in parts, so that its work can be spread over steps (runtime.shadow.lane
  // compute, root_job_placement.hpp). Parts run in order, possibly at different times and on
  // different threads, each with any workspace; what a part hands the next stays in the job, and
  // the result is bit-identical to compute_refresh. Part 0 resets job.status; a part after a
  // failed one does nothing.
  virtual int refresh_parts() const = 0;
  void compute_refresh_part(RefreshJob& job, int part, matfn::Workspace& ws) const;
  virtual void after_refresh(const float* G) = 0;
  virtual bool has_direction() const = 0;
  // In the backend's memory, in the stepping thread's scratch (one block's worth per thread, not a
  // buffer per block: at OLMo-1B that is a third per-parameter copy): valid until the thread
  // steps another block.
  const float* direction() const { return const_cast<BlockPreconditioner*>(this)->direction_data(); }
  const BlockBackend& backend() const { return backend_; }
  PreconditionerBytes state_bytes() const;
  // The block's state tensors (preconditioner_state_specs order); pointers stay valid.
  std::vector<StateTensor*> states();

  // Installs a computed refresh, or keeps the previous state when the job failed (counted;
  // throws after more than max_failures consecutive failures).
  void publish(const RefreshJob& job);
  // For runtime.coherence.tolerance: snapshot_installed copies the installed roots (Shampoo) or
  // bases (SOAP, KL-Shampoo) into the job; refresh_change is then how much the computed version
  // differs from them, as a relative Frobenius norm: Shampoo ||new - installed|| / ||installed||
  // of the roots; SOAP and KL-Shampoo the off-diagonal share ||offdiag(Q^T F Q)|| / ||Q^T F Q||
  // of the job's factors F in the installed bases Q (0: they still diagonalize the factors, so
  // the new bases would change nothing), since bases themselves turn freely within nearly
  // degenerate eigenspaces. Infinity when nothing was installed. Pure: it reads only the job.
  virtual void snapshot_installed(RefreshJob& job) const = 0;
  virtual double refresh_change(const RefreshJob& job) const = 0;
  // Coherence with staleness > 1 (runtime/coherence.hpp): a block's owner computes versions that
  // are dropped, never installed; the next refresh continues from the newest of them, not from
  // the installed state, so that every refresh carries the basis forward as a replicated run
  // without staleness would. keep_dropped copies what that needs from a computed job into `kept`
  // (the bases rounded to fp32 as an install rounds them, so that the chain is exactly the one a
  // run installing every version walks, and their permutations of the installed bases); false
  // when the algorithm's refresh does not build on the previous one (Shampoo's roots come from
  // the factors alone). continue_from puts `kept` into a just-snapshotted job.
  virtual bool keep_dropped(const RefreshJob&, RefreshJob&) const { return false; }
  virtual void continue_from(const RefreshJob&, RefreshJob&) const {}
  int consecutive_failures() const { return failures_; }
  int64_t refresh_count() const { return refreshes_; }
  // Everything of the block's state that is not a state tensor (failure and refresh counts, the
  // algorithm's step count and flags), for checkpoints; restore takes what counters() gave.
  std::vector<int64_t> counters() const;
  void restore_counters(const std::vector<int64_t>& counters);

  // The whole step with an inline refresh when `refresh` (tests, native mode).
  void step(const float* G, RefreshJob& job, matfn::Workspace& ws, bool refresh);

 protected:
  virtual void install(const RefreshJob& job) = 0;
  virtual std::vector<int64_t> algorithm_counters() const = 0;
  virtual void restore_algorithm_counters(const std::vector<int64_t>& c) = 0;
  // Part `part` of the refresh; job.status is Ok on entry.
  virtual void refresh_part(RefreshJob& job, int part, matfn::Workspace& ws) const = 0;
  // The whole refresh by the backend's solvers (BlockBackend::qr_refresh / inverse_root): false
  // when they do not cover it (the default). job.status is Ok on entry.
  virtual bool refresh_on_backend(RefreshJob&) const { return false; }
  StateTensor& state(size_t i) { return states_[i]; }
  float* direction_data() { return backend_.scratch(BlockBackend::kDirectionSlot, static_cast<size_t>(rows_ * cols_)); }
  std::string name_;
  int64_t rows_, cols_;
  PreconditionerParams p_;
  const BlockBackend& backend_;

 private:
  std::vector<StateTensor> states_;   // never resized after construction (derived classes refer to them)
  OwnedStateMemory own_memory_;
  int failures_ = 0;
  int64_t refreshes_ = 0;
};

// Bytes a block of this algorithm would hold, without allocating it.
PreconditionerBytes preconditioner_bytes(OptimizerKind algorithm, int64_t rows, int64_t cols);

std::unique_ptr<BlockPreconditioner> make_preconditioner(OptimizerKind algorithm, std::string name,
                                                         int64_t rows, int64_t cols,
                                                         const PreconditionerParams& p,
                                                         bool own_memory = true,
                                                         const BlockBackend& backend = host_block_backend());

}  // namespace asteria
