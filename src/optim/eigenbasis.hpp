#pragma once
// The part SOAP and KL-Shampoo share: preconditioners that work in the eigenbasis (Q_L, Q_R) of
// their Kronecker factors (L, R).
//   first call:  L = init_left * G G^T, R = init_right * G^T G; Q = their eigenbases
//                (eigenvalues descending; identity, counted as a failure, if eigh fails);
//                no update and not counted, as in the authors' implementations.
//   each step:   update(G) (the algorithm: moments, direction, factor statistics), t = 1, 2, ...
//   refresh:     snapshot (L, R, Q_L, Q_R) -> Q <- qr(F Q) on both sides, re-sorted by estimated
//                eigenvalue when `sort` -> install the new bases.
#include "optim/preconditioner.hpp"

namespace asteria {

class EigenbasisBlock : public BlockPreconditioner {
 public:
  void before_refresh(const float* G) final;
  void snapshot(RefreshJob& job) const final;
  int refresh_parts() const final { return 2 * matfn::kQrRefreshParts; }
  void after_refresh(const float*) final {}
  bool has_direction() const final { return has_direction_; }
  void snapshot_installed(RefreshJob& job) const final;
  double refresh_change(const RefreshJob& job) const final;
  bool keep_dropped(const RefreshJob& job, RefreshJob& kept) const final;
  void continue_from(const RefreshJob& kept, RefreshJob& job) const final;

  // For tests.
  const float* left_basis() const { return QL_.data(); }
  const float* right_basis() const { return QR_.data(); }
  int64_t steps() const { return t_; }

 protected:
  // init_left / init_right scale the first call's G G^T and G^T G.
  // states: L, R, Q_L, Q_R first (preconditioner_state_specs), then the algorithm's own.
  EigenbasisBlock(std::string name, int64_t rows, int64_t cols, const PreconditionerParams& p,
                  std::vector<StateSpec> states, bool own_memory, const BlockBackend& backend, bool sort,
                  float init_left, float init_right);
  // One counted step (t_ already incremented).
  virtual void update(const float* G) = 0;
  // After the first call set the factors and bases.
  virtual void initialized() {}
  // Copies the refreshed bases in; derived classes move their state along first if needed.
  void install(const RefreshJob& job) override;
  std::vector<int64_t> algorithm_counters() const final { return {t_, initialized_, has_direction_}; }
  void restore_algorithm_counters(const std::vector<int64_t>& c) final {
    t_ = c[0];
    initialized_ = c[1] != 0;
    has_direction_ = c[2] != 0;
  }
  void refresh_part(RefreshJob& job, int part, matfn::Workspace& ws) const final;
  bool refresh_on_backend(RefreshJob& job) const final;

  StateTensor &L_ = state(0), &R_ = state(1), &QL_ = state(2), &QR_ = state(3);
  int64_t t_ = 0;

 private:
  bool sort_;
  float init_left_, init_right_;
  bool initialized_ = false;
  bool has_direction_ = false;
};

}  // namespace asteria
