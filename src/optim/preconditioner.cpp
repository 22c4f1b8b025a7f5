#include "optim/preconditioner.hpp"

#include <array>

#include "core/error.hpp"
#include "optim/kl_shampoo.hpp"
#include "optim/shampoo.hpp"
#include "optim/soap.hpp"

namespace asteria {

BlockPreconditioner::BlockPreconditioner(std::string name, int64_t rows, int64_t cols,
                                         const PreconditionerParams& p, std::vector<StateSpec> states,
                                         bool own_memory, const BlockBackend& backend)
    : name_(std::move(name)), rows_(rows), cols_(cols), p_(p), backend_(backend) {
  ASTERIA_ASSERT(!(own_memory && backend.on_device()), "a device backend's block state is bound by its owner");
  states_.reserve(states.size());
  for (StateSpec& s : states) states_.emplace_back(std::move(s));
  if (own_memory) own_memory_.bind(this->states());
}

std::vector<StateTensor*> BlockPreconditioner::states() {
  std::vector<StateTensor*> out;
  for (StateTensor& s : states_) out.push_back(&s);
  return out;
}

namespace {

// The first two states of every algorithm are its factors; warm ones are roots / bases.
template <class SpecAt>
PreconditionerBytes bytes_by_kind(size_t n, SpecAt spec_at) {
  PreconditionerBytes b;
  for (size_t i = 0; i < n; ++i) {
    const StateSpec& s = spec_at(i);
    (i < 2 ? b.factors : s.cls == StateClass::Warm ? b.roots : b.moments) += s.bytes();
  }
  return b;
}

}  // namespace

PreconditionerBytes BlockPreconditioner::state_bytes() const {
  return bytes_by_kind(states_.size(), [&](size_t i) -> const StateSpec& { return states_[i].spec(); });
}

void BlockPreconditioner::publish(const RefreshJob& job) {
  if (job.status != matfn::Status::Ok) {
    ++failures_;
    if (failures_ > p_.max_failures)
      fail("preconditioner refresh of ", name_, " failed ", failures_, " times in a row (last: ",
           matfn::to_string(job.status), "); optim.max_failures is ", p_.max_failures);
    return;  // keep the previous roots / basis
  }
  failures_ = 0;
  ++refreshes_;
  install(job);
}

std::vector<int64_t> BlockPreconditioner::counters() const {
  std::vector<int64_t> c = {failures_, refreshes_};
  for (int64_t x : algorithm_counters()) c.push_back(x);
  return c;
}

void BlockPreconditioner::restore_counters(const std::vector<int64_t>& c) {
  ASTERIA_CHECK(c.size() == 2 + algorithm_counters().size(), "the counters of block ", name_, " have ", c.size(),
                " values, expected ", 2 + algorithm_counters().size());
  failures_ = static_cast<int>(c[0]);
  refreshes_ = c[1];
  restore_algorithm_counters(std::vector<int64_t>(c.begin() + 2, c.end()));
}

void BlockPreconditioner::compute_refresh(RefreshJob& job, matfn::Workspace& ws) const {
  for (int part = 0; part < refresh_parts(); ++part) compute_refresh_part(job, part, ws);
}

void BlockPreconditioner::compute_refresh_in_place(RefreshJob& job, matfn::Workspace& ws) const {
  job.status = matfn::Status::Ok;
  if (!refresh_on_backend(job)) compute_refresh(job, ws);
}

void BlockPreconditioner::compute_refresh_part(RefreshJob& job, int part, matfn::Workspace& ws) const {
  ASTERIA_ASSERT(part >= 0 && part < refresh_parts());
  if (part == 0) job.status = matfn::Status::Ok;
  if (job.status == matfn::Status::Ok) refresh_part(job, part, ws);
}

std::vector<double> refresh_part_costs(OptimizerKind algorithm, int64_t rows, int64_t cols) {
  // One share per part of a side, sized by the matrix functions' part counts.
  static constexpr std::array<double, matfn::kQrRefreshParts> qr = {0.37, 0.31, 0.32};
  static constexpr std::array<double, matfn::kInverseRootEighParts> root = {0.86, 0.14};
  std::vector<double> shares;
  if (algorithm == OptimizerKind::Soap || algorithm == OptimizerKind::KlShampoo) shares.assign(qr.begin(), qr.end());
  else if (algorithm == OptimizerKind::Shampoo) shares.assign(root.begin(), root.end());
  else fail("no preconditioner for optimizer ", to_string(algorithm));
  std::vector<double> costs;
  for (const double n : {static_cast<double>(rows), static_cast<double>(cols)})
    for (const double share : shares) costs.push_back(share * n * n * n);
  return costs;
}

double step_matmul_flops(OptimizerKind algorithm, int64_t rows, int64_t cols) {
  const double m = static_cast<double>(rows), n = static_cast<double>(cols);
  switch (algorithm) {
    case OptimizerKind::Soap: return 5 * m * m * n + 5 * m * n * n;
    case OptimizerKind::Shampoo: return 3 * m * m * n + 3 * m * n * n;
    case OptimizerKind::KlShampoo: return 7 * m * m * n + 9 * m * n * n;
    default: fail("no preconditioner for optimizer ", to_string(algorithm));
  }
}

void BlockPreconditioner::step(const float* G, RefreshJob& job, matfn::Workspace& ws, bool refresh) {
  before_refresh(G);
  if (refresh && has_direction()) {
    snapshot(job);
    compute_refresh(job, ws);
    publish(job);
  }
  after_refresh(G);
}

std::vector<StateSpec> preconditioner_state_specs(OptimizerKind algorithm, const std::string& block,
                                                  int64_t rows, int64_t cols) {
  const std::vector<int64_t> mm = {rows, rows}, nn = {cols, cols}, mn = {rows, cols}, m = {rows}, n = {cols};
  auto spec = [&](const char* tensor, const std::vector<int64_t>& shape, StateClass cls) {
    size_t count = 1;
    for (int64_t d : shape) count *= static_cast<size_t>(d);
    return StateSpec{block + " / " + tensor, count, cls, shape, {}};
  };
  constexpr StateClass hot = StateClass::Hot, warm = StateClass::Warm;
  if (algorithm == OptimizerKind::Shampoo)   // factors, inverse roots, first moment, grafting second moment
    return {spec("L", mm, hot), spec("R", nn, hot), spec("L^-1/4", mm, warm), spec("R^-1/4", nn, warm),
            spec("m", mn, hot), spec("v", mn, hot)};
  if (algorithm == OptimizerKind::Soap)      // factors, eigenbases, Adam moments in the basis
    return {spec("L", mm, hot), spec("R", nn, hot), spec("Q_L", mm, warm), spec("Q_R", nn, warm),
            spec("m", mn, hot), spec("v", mn, hot)};
  if (algorithm == OptimizerKind::KlShampoo)  // factors, eigenbases, first moment, eigenvalue estimates
    return {spec("S_L", mm, hot), spec("S_R", nn, hot), spec("Q_L", mm, warm), spec("Q_R", nn, warm),
            spec("m", mn, hot), spec("d_L", m, hot), spec("d_R", n, hot)};
  fail("no preconditioner for optimizer ", to_string(algorithm));
}

PreconditionerBytes preconditioner_bytes(OptimizerKind algorithm, int64_t rows, int64_t cols) {
  const auto specs = preconditioner_state_specs(algorithm, "", rows, cols);
  return bytes_by_kind(specs.size(), [&](size_t i) -> const StateSpec& { return specs[i]; });
}

std::unique_ptr<BlockPreconditioner> make_preconditioner(OptimizerKind algorithm, std::string name,
                                                         int64_t rows, int64_t cols,
                                                         const PreconditionerParams& p, bool own_memory,
                                                         const BlockBackend& backend) {
  if (algorithm == OptimizerKind::Soap) return std::make_unique<SoapBlock>(std::move(name), rows, cols, p, own_memory, backend);
  if (algorithm == OptimizerKind::Shampoo)
    return std::make_unique<ShampooBlock>(std::move(name), rows, cols, p, own_memory, backend);
  if (algorithm == OptimizerKind::KlShampoo)
    return std::make_unique<KLShampooBlock>(std::move(name), rows, cols, p, own_memory, backend);
  fail("no preconditioner for optimizer ", to_string(algorithm));
}

size_t refresh_payload_floats(OptimizerKind algorithm, int64_t rows, int64_t cols) {
  const size_t square = static_cast<size_t>(rows * rows + cols * cols);
  return algorithm == OptimizerKind::Shampoo ? square : square + static_cast<size_t>(rows + cols);
}

}  // namespace asteria
