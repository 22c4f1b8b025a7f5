#include "optim/preconditioner.hpp"

#include "core/error.hpp"
#include "optim/kl_shampoo.hpp"
#include "optim/shampoo.hpp"
#include "optim/soap.hpp"

namespace asteria {

BlockPreconditioner::BlockPreconditioner(std::string name, int64_t rows, int64_t cols,
                                         const PreconditionerParams& p)
    : name_(std::move(name)), rows_(rows), cols_(cols), p_(p), direction_(static_cast<size_t>(rows * cols)) {}

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

void BlockPreconditioner::step(const float* G, RefreshJob& job, matfn::Workspace& ws, bool refresh) {
  before_refresh(G);
  if (refresh && has_direction()) {
    snapshot(job);
    compute_refresh(job, ws);
    publish(job);
  }
  after_refresh(G);
}

PreconditionerBytes preconditioner_bytes(const std::string& algorithm, int64_t rows, int64_t cols) {
  const size_t f = sizeof(float);
  const size_t mm = static_cast<size_t>(rows * rows) * f, nn = static_cast<size_t>(cols * cols) * f;
  const size_t mn = static_cast<size_t>(rows * cols) * f;
  PreconditionerBytes b;
  b.factors = mm + nn;
  b.roots = mm + nn;  // Shampoo: inverse roots; SOAP / KL-Shampoo: eigenbases
  if (algorithm == "shampoo") b.moments = 2 * mn;                    // first moment, grafting v
  else if (algorithm == "soap") b.moments = 2 * mn;                  // Adam m, v in the basis
  else if (algorithm == "kl_shampoo") b.moments = mn + static_cast<size_t>(rows + cols) * f;
  else fail("unknown preconditioner '", algorithm, "'");
  b.moments += mn;  // the direction buffer
  return b;
}

std::unique_ptr<BlockPreconditioner> make_preconditioner(const std::string& algorithm, std::string name,
                                                         int64_t rows, int64_t cols,
                                                         const PreconditionerParams& p) {
  if (algorithm == "shampoo") return std::make_unique<ShampooBlock>(std::move(name), rows, cols, p);
  if (algorithm == "soap") return std::make_unique<SoapBlock>(std::move(name), rows, cols, p);
  if (algorithm == "kl_shampoo") return std::make_unique<KLShampooBlock>(std::move(name), rows, cols, p);
  fail("unknown preconditioner '", algorithm, "'");
}

}  // namespace asteria
