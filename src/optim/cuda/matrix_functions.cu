// eigh, the inverse root and SOAP's QR refresh on CUDA through cuSOLVER (syevd, geqrf, orgqr;
// contract: optim/matrix_functions.hpp, namespace matfn::cuda). Row-major and column-major agree on a
// symmetric matrix; the lower triangle of the column-major view is the CPU's upper ('U', row-major).
// syevd returns the eigenvectors as columns of a column-major matrix, transposed here into the
// row-major V of the CPU contract. The inverse root never needs that transpose:
// out = sum_j mu_j^(-1/p) v_j v_j^T is the same matrix in both layouts.
#include <cublas_v2.h>
#include <cusolverDn.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <type_traits>
#include <vector>

#include "core/cuda/cuda_check.hpp"
#include "core/cuda/cuda_context.hpp"
#include "optim/matrix_functions.hpp"

namespace asteria::matfn::cuda {

namespace {

#define ASTERIA_CUSOLVER(call)                                                                      \
  do {                                                                                              \
    const cusolverStatus_t st_ = (call);                                                            \
    if (st_ != CUSOLVER_STATUS_SUCCESS) ::asteria::fail(#call, " failed with cusolver status ", static_cast<int>(st_)); \
  } while (0)

// One cuSOLVER handle per thread, on the thread's current stream, with the thread's cuBLAS one.
struct Handles {
  cusolverDnHandle_t solver = nullptr;
  cusolverDnParams_t params = nullptr;
  cublasHandle_t blas = nullptr;   // asteria::cuda::thread_cublas(), not owned
  ~Handles() {
    if (params) cusolverDnDestroyParams(params);
    if (solver) cusolverDnDestroy(solver);
  }
};
thread_local Handles t_handles;

Handles& handles() {
  Handles& h = t_handles;
  if (!h.solver) {
    ASTERIA_CUSOLVER(cusolverDnCreate(&h.solver));
    ASTERIA_CUSOLVER(cusolverDnCreateParams(&h.params));
  }
  ASTERIA_CUSOLVER(cusolverDnSetStream(h.solver, asteria::cuda::current_stream()));
  h.blas = asteria::cuda::thread_cublas();
  return h;
}

template <class Real>
constexpr cudaDataType kType = std::is_same_v<Real, double> ? CUDA_R_64F : CUDA_R_32F;

template <class Real>
__global__ void count_non_finite_kernel(const Real* x, size_t n, int* count) {
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += static_cast<size_t>(gridDim.x) * blockDim.x)
    if (!isfinite(x[i])) atomicAdd(count, 1);   // a count: the order of the additions does not matter
}

template <class Real>
__global__ void transpose_kernel(const Real* in, Real* out, int n) {
  const int i = blockIdx.y * blockDim.y + threadIdx.y, j = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n && j < n) out[static_cast<size_t>(i) * n + j] = in[static_cast<size_t>(j) * n + i];
}

// Column j of the column-major V scaled by s[j].
template <class Real>
__global__ void scale_columns_kernel(Real* V, const Real* s, int n) {
  const size_t id = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (id < static_cast<size_t>(n) * n) V[id] *= s[id / n];
}

// Device scratch of one call, in the thread's workspace: [T: n x n][w or s: n][counters][syevd].
template <class Real>
struct Scratch {
  Real* T;
  Real* v;
  int* info;       // [0] syevd's info, [1] the non-finite count
  void* work;
  size_t work_bytes;
  std::vector<char> host_work;
};

size_t aligned(size_t b) { return (b + 255) / 256 * 256; }

// syevd of A into the column-major eigenvectors s.T and the eigenvalues w (device; null: into
// s.v), plus the non-finite checks; returns the status.
template <class Real>
Status syevd(int n, const Real* A, Real* w, Scratch<Real>& s) {
  Handles& h = handles();
  const cudaStream_t stream = asteria::cuda::current_stream();
  const size_t nn = static_cast<size_t>(n) * n;
  size_t dev_bytes = 0, host_bytes = 0;
  ASTERIA_CUSOLVER(cusolverDnXsyevd_bufferSize(h.solver, h.params, CUSOLVER_EIG_MODE_VECTOR, CUBLAS_FILL_MODE_LOWER, n,
                                               kType<Real>, A, n, kType<Real>, A, kType<Real>, &dev_bytes, &host_bytes));
  const size_t t_bytes = aligned(nn * sizeof(Real)), v_bytes = aligned(n * sizeof(Real)), i_bytes = aligned(2 * sizeof(int));
  char* base = static_cast<char*>(asteria::cuda::thread_workspace(t_bytes + v_bytes + i_bytes + aligned(dev_bytes)));
  s.T = reinterpret_cast<Real*>(base);
  s.v = reinterpret_cast<Real*>(base + t_bytes);
  s.info = reinterpret_cast<int*>(base + t_bytes + v_bytes);
  s.work = base + t_bytes + v_bytes + i_bytes;
  s.work_bytes = dev_bytes;
  s.host_work.resize(host_bytes);
  if (!w) w = s.v;
  ASTERIA_CUDA_CHECK(cudaMemsetAsync(s.info, 0, 2 * sizeof(int), stream));
  count_non_finite_kernel<<<std::min<size_t>((nn + 255) / 256, 1024), 256, 0, stream>>>(A, nn, s.info + 1);
  ASTERIA_CUDA_LAUNCH_CHECK();
  int flags[2] = {0, 0};
  ASTERIA_CUDA_CHECK(cudaMemcpyAsync(flags, s.info, sizeof flags, cudaMemcpyDeviceToHost, stream));
  ASTERIA_CUDA_CHECK(cudaStreamSynchronize(stream));
  if (flags[1] > 0) return Status::NonFinite;
  ASTERIA_CUDA_CHECK(cudaMemcpyAsync(s.T, A, nn * sizeof(Real), cudaMemcpyDeviceToDevice, stream));
  ASTERIA_CUSOLVER(cusolverDnXsyevd(h.solver, h.params, CUSOLVER_EIG_MODE_VECTOR, CUBLAS_FILL_MODE_LOWER, n, kType<Real>,
                                    s.T, n, kType<Real>, w, kType<Real>, s.work, s.work_bytes,
                                    s.host_work.empty() ? nullptr : s.host_work.data(), s.host_work.size(), s.info));
  count_non_finite_kernel<<<1, 256, 0, stream>>>(w, static_cast<size_t>(n), s.info + 1);
  ASTERIA_CUDA_LAUNCH_CHECK();
  ASTERIA_CUDA_CHECK(cudaMemcpyAsync(flags, s.info, sizeof flags, cudaMemcpyDeviceToHost, stream));
  ASTERIA_CUDA_CHECK(cudaStreamSynchronize(stream));
  if (flags[0] != 0) return Status::LapackError;
  if (flags[1] > 0) return Status::NonFinite;
  return Status::Ok;
}

void gemm_nt(cublasHandle_t h, int n, const double* W, double* out) {
  const double one = 1, zero = 0;
  ASTERIA_CUBLAS_CHECK(cublasDgemm(h, CUBLAS_OP_N, CUBLAS_OP_T, n, n, n, &one, W, n, W, n, &zero, out, n));
}
void gemm_nt(cublasHandle_t h, int n, const float* W, float* out) {
  const float one = 1, zero = 0;
  // No TF32: the CPU's fp32 refresh is what this must match.
  ASTERIA_CUBLAS_CHECK(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_T, n, n, n, &one, W, n, W, n, &zero, out, n));
}

}  // namespace

template <class Real>
Status eigh(int n, const Real* A, Real* w, Real* V) {
  Scratch<Real> s;
  const Status st = syevd(n, A, w, s);
  if (st != Status::Ok) return st;
  const dim3 threads(16, 16), blocks((n + 15) / 16, (n + 15) / 16);
  transpose_kernel<<<blocks, threads, 0, asteria::cuda::current_stream()>>>(s.T, V, n);
  ASTERIA_CUDA_LAUNCH_CHECK();
  ASTERIA_CUDA_CHECK(cudaStreamSynchronize(asteria::cuda::current_stream()));
  return Status::Ok;
}

template <class Real>
Status inverse_root_eigh(int n, const Real* A, double p, double eps, Real* out) {
  Scratch<Real> s;
  Status st = syevd(n, A, static_cast<Real*>(nullptr), s);
  if (st != Status::Ok) return st;
  const cudaStream_t stream = asteria::cuda::current_stream();
  // The clamp, the singularity test and the powers on the host: the CPU's rule, the CPU's code.
  std::vector<Real> w(n);
  ASTERIA_CUDA_CHECK(cudaMemcpyAsync(w.data(), s.v, n * sizeof(Real), cudaMemcpyDeviceToHost, stream));
  ASTERIA_CUDA_CHECK(cudaStreamSynchronize(stream));
  st = inverse_root_scales(n, w.data(), p, eps);
  if (st != Status::Ok) return st;
  ASTERIA_CUDA_CHECK(cudaMemcpyAsync(s.v, w.data(), n * sizeof(Real), cudaMemcpyHostToDevice, stream));
  const size_t nn = static_cast<size_t>(n) * n;
  scale_columns_kernel<<<static_cast<unsigned>((nn + 255) / 256), 256, 0, stream>>>(s.T, s.v, n);
  ASTERIA_CUDA_LAUNCH_CHECK();
  gemm_nt(handles().blas, n, s.T, out);
  int flags[2] = {0, 0};
  ASTERIA_CUDA_CHECK(cudaMemsetAsync(s.info + 1, 0, sizeof(int), stream));
  count_non_finite_kernel<<<std::min<size_t>((nn + 255) / 256, 1024), 256, 0, stream>>>(out, nn, s.info + 1);
  ASTERIA_CUDA_LAUNCH_CHECK();
  ASTERIA_CUDA_CHECK(cudaMemcpyAsync(flags, s.info, sizeof flags, cudaMemcpyDeviceToHost, stream));
  ASTERIA_CUDA_CHECK(cudaStreamSynchronize(stream));
  return flags[1] > 0 ? Status::NonFinite : Status::Ok;
}

namespace {

// d[j] = sum_i Q[i][j] LQ[i][j] in fp64, i ascending: the CPU's order (row-major operands).
template <class Real>
__global__ void column_dots_kernel(const Real* Q, const Real* LQ, int n, double* d) {
  const int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= n) return;
  double s = 0;
  for (int i = 0; i < n; ++i) s += static_cast<double>(Q[static_cast<size_t>(i) * n + j]) * LQ[static_cast<size_t>(i) * n + j];
  d[j] = s;
}

// T (column-major) = LQ[:, perm] (row-major): the re-sorted power step, laid out for geqrf.
template <class Real>
__global__ void gather_columns_kernel(const Real* LQ, const int* perm, int n, Real* T) {
  const int i = blockIdx.y * blockDim.y + threadIdx.y, k = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n && k < n) T[static_cast<size_t>(k) * n + i] = LQ[static_cast<size_t>(i) * n + perm[k]];
}

void gemm_nn(cublasHandle_t h, int n, const double* A, const double* B, double* C) {
  const double one = 1, zero = 0;
  ASTERIA_CUBLAS_CHECK(cublasDgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, A, n, B, n, &zero, C, n));
}
void gemm_nn(cublasHandle_t h, int n, const float* A, const float* B, float* C) {
  const float one = 1, zero = 0;
  ASTERIA_CUBLAS_CHECK(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, A, n, B, n, &zero, C, n));
}
cusolverStatus_t orgqr_size(cusolverDnHandle_t h, int n, const double* A, const double* tau, int* lwork) {
  return cusolverDnDorgqr_bufferSize(h, n, n, n, A, n, tau, lwork);
}
cusolverStatus_t orgqr_size(cusolverDnHandle_t h, int n, const float* A, const float* tau, int* lwork) {
  return cusolverDnSorgqr_bufferSize(h, n, n, n, A, n, tau, lwork);
}
cusolverStatus_t orgqr(cusolverDnHandle_t h, int n, double* A, const double* tau, double* work, int lwork, int* info) {
  return cusolverDnDorgqr(h, n, n, n, A, n, tau, work, lwork, info);
}
cusolverStatus_t orgqr(cusolverDnHandle_t h, int n, float* A, const float* tau, float* work, int lwork, int* info) {
  return cusolverDnSorgqr(h, n, n, n, A, n, tau, work, lwork, info);
}

}  // namespace

template <class Real>
Status qr_refresh(int n, const Real* L, Real* Q, std::vector<int>& perm, bool sort) {
  Handles& h = handles();
  const cudaStream_t stream = asteria::cuda::current_stream();
  const size_t nn = static_cast<size_t>(n) * n;
  size_t geqrf_dev = 0, geqrf_host = 0;
  ASTERIA_CUSOLVER(cusolverDnXgeqrf_bufferSize(h.solver, h.params, n, n, kType<Real>, L, n, kType<Real>, L, kType<Real>,
                                               &geqrf_dev, &geqrf_host));
  int orgqr_lwork = 0;
  ASTERIA_CUSOLVER(orgqr_size(h.solver, n, L, L, &orgqr_lwork));
  // [LQ][T][tau][d: fp64][perm][info: geqrf, orgqr, non-finite][geqrf work][orgqr work]
  const size_t b_m = aligned(nn * sizeof(Real)), b_v = aligned(n * sizeof(Real)), b_d = aligned(n * sizeof(double)),
               b_p = aligned(n * sizeof(int)), b_i = aligned(3 * sizeof(int)), b_g = aligned(geqrf_dev),
               b_o = aligned(static_cast<size_t>(orgqr_lwork) * sizeof(Real));
  char* at = static_cast<char*>(asteria::cuda::thread_workspace(2 * b_m + b_v + b_d + b_p + b_i + b_g + b_o));
  auto take = [&](size_t bytes) {
    char* p = at;
    at += bytes;
    return p;
  };
  Real* LQ = reinterpret_cast<Real*>(take(b_m));
  Real* T = reinterpret_cast<Real*>(take(b_m));
  Real* tau = reinterpret_cast<Real*>(take(b_v));
  double* d = reinterpret_cast<double*>(take(b_d));
  int* dperm = reinterpret_cast<int*>(take(b_p));
  int* info = reinterpret_cast<int*>(take(b_i));
  void* geqrf_work = take(b_g);
  Real* orgqr_work = reinterpret_cast<Real*>(take(b_o));
  std::vector<char> host_work(geqrf_host);
  int flags[3] = {0, 0, 0};
  const auto read_flags = [&] {
    ASTERIA_CUDA_CHECK(cudaMemcpyAsync(flags, info, sizeof flags, cudaMemcpyDeviceToHost, stream));
    ASTERIA_CUDA_CHECK(cudaStreamSynchronize(stream));
  };

  ASTERIA_CUDA_CHECK(cudaMemsetAsync(info, 0, 3 * sizeof(int), stream));
  const unsigned grid = static_cast<unsigned>(std::min<size_t>((nn + 255) / 256, 1024));
  count_non_finite_kernel<<<grid, 256, 0, stream>>>(L, nn, info + 2);
  count_non_finite_kernel<<<grid, 256, 0, stream>>>(Q, nn, info + 2);
  ASTERIA_CUDA_LAUNCH_CHECK();
  // Row-major LQ = L Q is column-major LQ^T = Q^T L^T: the buffers in swapped order.
  gemm_nn(h.blas, n, Q, L, LQ);
  column_dots_kernel<<<(n + 127) / 128, 128, 0, stream>>>(Q, LQ, n, d);
  ASTERIA_CUDA_LAUNCH_CHECK();
  std::vector<double> dh(n);
  ASTERIA_CUDA_CHECK(cudaMemcpyAsync(dh.data(), d, n * sizeof(double), cudaMemcpyDeviceToHost, stream));
  read_flags();
  if (flags[2] > 0) return Status::NonFinite;
  std::vector<Real> w(n);
  for (int j = 0; j < n; ++j) w[j] = static_cast<Real>(dh[j]);
  perm.resize(n);
  std::iota(perm.begin(), perm.end(), 0);
  if (sort) std::stable_sort(perm.begin(), perm.end(), [&](int a, int b) { return w[a] > w[b]; });
  ASTERIA_CUDA_CHECK(cudaMemcpyAsync(dperm, perm.data(), n * sizeof(int), cudaMemcpyHostToDevice, stream));
  const dim3 threads(16, 16), blocks((n + 15) / 16, (n + 15) / 16);
  gather_columns_kernel<<<blocks, threads, 0, stream>>>(LQ, dperm, n, T);
  ASTERIA_CUDA_LAUNCH_CHECK();
  ASTERIA_CUSOLVER(cusolverDnXgeqrf(h.solver, h.params, n, n, kType<Real>, T, n, kType<Real>, tau, kType<Real>, geqrf_work,
                                    geqrf_dev, host_work.empty() ? nullptr : host_work.data(), host_work.size(), info));
  ASTERIA_CUSOLVER(orgqr(h.solver, n, T, tau, orgqr_work, orgqr_lwork, info + 1));
  count_non_finite_kernel<<<grid, 256, 0, stream>>>(T, nn, info + 2);
  ASTERIA_CUDA_LAUNCH_CHECK();
  read_flags();
  if (flags[0] != 0 || flags[1] != 0) return Status::LapackError;
  if (flags[2] > 0) return Status::NonFinite;
  transpose_kernel<<<blocks, threads, 0, stream>>>(T, Q, n);   // Q unchanged until here
  ASTERIA_CUDA_LAUNCH_CHECK();
  ASTERIA_CUDA_CHECK(cudaStreamSynchronize(stream));
  return Status::Ok;
}

template Status eigh<double>(int, const double*, double*, double*);
template Status eigh<float>(int, const float*, float*, float*);
template Status inverse_root_eigh<double>(int, const double*, double, double, double*);
template Status inverse_root_eigh<float>(int, const float*, double, double, float*);
template Status qr_refresh<double>(int, const double*, double*, std::vector<int>&, bool);
template Status qr_refresh<float>(int, const float*, float*, std::vector<int>&, bool);

}  // namespace asteria::matfn::cuda
