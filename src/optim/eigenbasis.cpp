#include "optim/eigenbasis.hpp"

#include "optim/block_math.hpp"

namespace asteria::eigenbasis {

using blockmath::to_double;
using blockmath::to_float;

matfn::Status initial(int64_t d, const float* F, float* Q) {
  static thread_local matfn::Workspace ws;
  static thread_local std::vector<double> a, q;
  a.resize(d * d);
  q.resize(d * d);
  to_double(d * d, F, a.data());
  matfn::Status s = matfn::eigenbasis_descending(static_cast<int>(d), a.data(), q.data(), ws);
  if (s == matfn::Status::Ok) {
    to_float(d * d, q.data(), Q);
  } else {
    for (int64_t i = 0; i < d * d; ++i) Q[i] = (i / d == i % d) ? 1.0f : 0.0f;
  }
  return s;
}

void snapshot(RefreshJob& job, int64_t m, int64_t n, const float* L, const float* R, const float* QL,
              const float* QR) {
  job.rows = m;
  job.cols = n;
  job.left.resize(m * m);
  job.right.resize(n * n);
  job.left_basis.resize(m * m);
  job.right_basis.resize(n * n);
  to_double(m * m, L, job.left.data());
  to_double(n * n, R, job.right.data());
  to_double(m * m, QL, job.left_basis.data());
  to_double(n * n, QR, job.right_basis.data());
}

void refresh(RefreshJob& job, matfn::Workspace& ws, bool sort) {
  const int m = static_cast<int>(job.rows), n = static_cast<int>(job.cols);
  job.status = matfn::qr_refresh(m, job.left.data(), job.left_basis.data(), job.left_perm, ws, sort);
  if (job.status == matfn::Status::Ok)
    job.status = matfn::qr_refresh(n, job.right.data(), job.right_basis.data(), job.right_perm, ws, sort);
}

}  // namespace asteria::eigenbasis
