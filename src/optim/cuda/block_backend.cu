// The CUDA block backend (optim/block_backend.hpp): a second-order optimizer's block state in
// device memory and its per-step work on the calling thread's current stream; the refresh
// snapshots' copies on a low-priority staging stream into pinned memory. The products are
// blockmath::cuda's (cuBLAS / cuBLASLt, fp32); the elementwise kernels use round-to-nearest
// intrinsics so that nvcc contracts nothing into a fused multiply-add, as the CPU build does not.
#include <array>
#include <cmath>
#include <vector>

#include "core/error.hpp"
#include "core/cuda/cuda_check.hpp"
#include "core/cuda/cuda_context.hpp"
#include "core/cuda/device_buffer.hpp"
#include "optim/block_backend.hpp"
#include "core/cuda/cublaslt_gemm.hpp"
#include "optim/block_math.hpp"
#include "optim/sum_of_squares.hpp"

namespace asteria {

namespace {

using cuda::current_stream;

unsigned grid_for(int64_t n) { return static_cast<unsigned>((n + 255) / 256); }

__global__ void scaled_copy_kernel(const float* src, int64_t ld, int64_t rows, int64_t cols, float scale, float* dst,
                                   int* non_finite) {
  const int64_t k = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (k >= rows * cols) return;
  const int64_t i = k / cols, j = k % cols;
  const float x = __fmul_rn(src[i * ld + j], scale);
  dst[k] = x;
  if (!isfinite(x)) *non_finite = 1;   // any writer: only "some" matters
}

template <class From, class To>
__global__ void convert_kernel(const From* x, int64_t n, To* out) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    out[i] = static_cast<To>(x[i]);
}

__global__ void scale_kernel(float* x, int64_t n, float s) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) x[i] = __fmul_rn(x[i], s);
}

__global__ void permute_kernel(const float* X, const int* row_perm, const int* col_perm, int64_t m, int64_t n,
                               float* out) {
  const int64_t k = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (k >= m * n) return;
  const int64_t i = k / n, j = k % n;
  out[k] = X[static_cast<int64_t>(row_perm[i]) * n + col_perm[j]];
}

// update_compensation.hpp's compensated_add.
__device__ void compensated_add_rn(float& w, float& c, float delta) {
  const float y = __fsub_rn(delta, c);
  const float t = __fadd_rn(w, y);
  c = __fsub_rn(__fsub_rn(t, w), y);
  w = t;
}

__global__ void apply_update_kernel(float* W, float* C, int64_t ld, const float* D, int64_t rows, int64_t cols,
                                    float lr, float lr_wd, bool decay_first) {
  const int64_t k = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (k >= rows * cols) return;
  const int64_t i = k / cols, j = k % cols;
  float& w = W[i * ld + j];
  const float d = D[k];
  if (decay_first) {   // W <- W - (lr D + lr_wd W)
    const float delta = __fadd_rn(__fmul_rn(lr, d), __fmul_rn(lr_wd, w));
    if (C) compensated_add_rn(w, C[i * ld + j], -delta);
    else w = __fsub_rn(w, delta);
  } else if (C) {      // W' = W - lr D;  W <- W' - lr_wd W'
    compensated_add_rn(w, C[i * ld + j], -__fmul_rn(lr, d));
    compensated_add_rn(w, C[i * ld + j], -__fmul_rn(lr_wd, w));
  } else {
    const float stepped = __fsub_rn(w, __fmul_rn(lr, d));
    w = __fsub_rn(stepped, __fmul_rn(lr_wd, stepped));
  }
}

__global__ void ema_kernel(float* x, const float* y, int64_t n, float b, float a) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) x[i] = __fadd_rn(__fmul_rn(b, x[i]), __fmul_rn(a, y[i]));
}

__global__ void shampoo_moments_kernel(float* M, float* V, const float* G, int64_t mn, float b1, float b2, float m_add,
                                       float v_add) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= mn) return;
  const float g = G[i];
  M[i] = __fadd_rn(__fmul_rn(b1, M[i]), __fmul_rn(m_add, g));
  V[i] = __fadd_rn(__fmul_rn(b2, V[i]), __fmul_rn(__fmul_rn(v_add, g), g));
}

__global__ void adam_direction_kernel(const float* M, const float* V, int64_t mn, float inv_bc1, float inv_bc2,
                                      float eps, bool graft, float* A) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= mn) return;
  const float mh = __fmul_rn(M[i], inv_bc1);
  A[i] = graft ? __fdiv_rn(mh, __fadd_rn(__fsqrt_rn(__fmul_rn(V[i], inv_bc2)), eps)) : mh;
}

__global__ void kl_damp_kernel(float* P, const float* dL, const float* dR, int64_t m, int64_t n, float damping) {
  const int64_t k = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (k >= m * n) return;
  const float s = __fmul_rn(dL[k / n], dR[k % n]);
  P[k] = __fmul_rn(P[k], __fdiv_rn(s, __fadd_rn(1.0f, __fmul_rn(s, damping))));
}

// out[a] = sum_b (H[a * outer + b * inner] s[b])^2 over b ascending, one thread per a: rows
// (outer n, inner 1, s = dR) give ldiag, columns (outer 1, inner n, s = dL) rdiag, in the CPU's order.
__global__ void kl_diagonal_kernel(const float* H, const float* s, int64_t count, int64_t length, int64_t outer,
                                   int64_t inner, double* out) {
  const int64_t a = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (a >= count) return;
  double acc = 0;
  for (int64_t b = 0; b < length; ++b) {
    const double x = __dmul_rn(static_cast<double>(H[a * outer + b * inner]), static_cast<double>(s[b]));
    acc = __dadd_rn(acc, __dmul_rn(x, x));
  }
  out[a] = acc;
}

__global__ void scale_columns_kernel(float* X, const float* s, int64_t m, int64_t n) {
  const int64_t k = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (k < m * n) X[k] = __fmul_rn(X[k], s[k % n]);
}
__global__ void scale_rows_kernel(float* X, const float* s, int64_t m, int64_t n) {
  const int64_t k = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (k < m * n) X[k] = __fmul_rn(X[k], s[k / n]);
}

// Page-locked host memory (the snapshots' staging: DMA straight into it), grown, never shrunk.
struct PinnedFloats {
  float* data = nullptr;
  size_t size = 0;
  PinnedFloats() = default;
  PinnedFloats(const PinnedFloats&) = delete;
  PinnedFloats& operator=(const PinnedFloats&) = delete;
  ~PinnedFloats() {
    if (data) cudaFreeHost(data);   // no throw: a destructor
  }
  float* at_least(size_t n) {
    if (n > size) {
      if (data) ASTERIA_CUDA_CHECK(cudaFreeHost(data));
      data = nullptr;
      size = 0;
      ASTERIA_CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&data), n * sizeof(float)));
      size = n;
    }
    return data;
  }
};

// A stream of the lowest priority, non-blocking (the default stream's work does not wait for
// it); never destroyed (it lives as long as the process's CUDA context).
cudaStream_t new_background_stream() {
  int least = 0, greatest = 0;
  ASTERIA_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  cudaStream_t s = nullptr;
  ASTERIA_CUDA_CHECK(cudaStreamCreateWithPriority(&s, cudaStreamNonBlocking, least));
  return s;
}

// The refresh snapshots' stream, shared by every thread.
cudaStream_t staging_stream() {
  static const cudaStream_t stream = new_background_stream();
  return stream;
}

// One thread's device memory: the scratch slots, the finiteness flag, the permutations.
struct ThreadDeviceMemory {
  std::array<cuda::DeviceBuffer<float>, BlockBackend::kSlots> slots;
  cuda::DeviceBuffer<int> flag{1};
  cuda::DeviceBuffer<int> perms;
  cuda::DeviceBuffer<double> diagonals;   // KL-Shampoo's ldiag, rdiag
  cuda::DeviceBuffer<double> refresh;     // a native refresh's two n x n fp64 matrices
  std::vector<float> host;   // staging of from_host_double
  PinnedFloats pinned;       // staging of to_host_double (the snapshots)
  cudaEvent_t ready = nullptr;   // "the calling thread's stream has run what it queued"
  ~ThreadDeviceMemory() {
    if (ready) cudaEventDestroy(ready);
  }
};
ThreadDeviceMemory& thread_memory() {
  static thread_local ThreadDeviceMemory memory;
  return memory;
}

class CudaBlockBackend final : public BlockBackend {
 private:
  static double* refresh_memory(size_t count) {
    cuda::DeviceBuffer<double>& b = thread_memory().refresh;
    if (b.size() < count) {
      cuda::synchronize_current_stream();
      b.resize(count);
    }
    return b.data();
  }
  // A native refresh's matrix function on the device in `precision`: the n x n host matrices
  // `first` and `second` (may be null: then not uploaded) go to the device as its two arguments,
  // compute(first, second) computes (returning a matfn::Status) and leaves its result in the
  // second, which comes back into `result`. For float32 the arguments are rounded to fp32 on the
  // device (round to nearest, as the host's fp32 functions round them) and the result widened;
  // when fp32 fails it is computed again in fp64, as the host retries (matrix_functions.hpp).
  template <class Compute>
  static matfn::Status refresh_on_device(matfn::Precision precision, int n, const double* first,
                                         const double* second, double* result, Compute compute) {
    const size_t nn = static_cast<size_t>(n) * n;
    // Two fp64 matrices, then, for float32, two fp32 ones in the room of a third.
    double* d = refresh_memory((precision == matfn::Precision::Float32 ? 3 : 2) * nn);
    cuda::copy_to_device(d, first, nn * sizeof(double));
    if (second) cuda::copy_to_device(d + nn, second, nn * sizeof(double));
    matfn::Status status = matfn::Status::LapackError;
    if (precision == matfn::Precision::Float32) {
      // The fp64 arguments stay as they were for the retry.
      float* f = reinterpret_cast<float*>(d + 2 * nn);
      const int64_t in = static_cast<int64_t>(second ? 2 * nn : nn);
      convert_kernel<<<grid_for(in), 256, 0, current_stream()>>>(d, in, f);
      ASTERIA_CUDA_LAUNCH_CHECK();
      status = compute(f, f + nn);
      if (status == matfn::Status::Ok) {
        convert_kernel<<<grid_for(static_cast<int64_t>(nn)), 256, 0, current_stream()>>>(
            f + nn, static_cast<int64_t>(nn), d + nn);
        ASTERIA_CUDA_LAUNCH_CHECK();
      }
    }
    if (status != matfn::Status::Ok) status = compute(d, d + nn);
    if (status == matfn::Status::Ok) cuda::copy_to_host(result, d + nn, nn * sizeof(double));
    return status;
  }

 public:
  bool on_device() const override { return true; }

  float* scratch(int slot, size_t count) const override {
    ASTERIA_ASSERT(slot >= 0 && slot < kSlots, "device scratch slot ", slot);
    cuda::DeviceBuffer<float>& b = thread_memory().slots[slot];
    if (b.size() < count) {
      cuda::synchronize_current_stream();   // queued work may still use the old buffer
      b.resize(count);
    }
    return b.data();
  }

  void to_host(float* host, const float* x, size_t n) const override {
    cuda::copy_to_host(host, x, n * sizeof(float));
  }
  void from_host(float* x, const float* host, size_t n) const override {
    cuda::copy_to_device(x, host, n * sizeof(float));
  }
  // A snapshot's copy: on the low-priority staging stream, into pinned memory, after what the
  // calling thread's stream has queued (a native refresh's snapshot follows the block's queued
  // statistics; the shadow pipeline's follows a finished optimizer step); returns when done.
  void to_host_double(const float* x, size_t n, double* host) const override {
    if (n == 0) return;
    ThreadDeviceMemory& t = thread_memory();
    if (!t.ready) ASTERIA_CUDA_CHECK(cudaEventCreateWithFlags(&t.ready, cudaEventDisableTiming));
    float* h = t.pinned.at_least(n);
    const cudaStream_t staging = staging_stream();
    ASTERIA_CUDA_CHECK(cudaEventRecord(t.ready, current_stream()));
    ASTERIA_CUDA_CHECK(cudaStreamWaitEvent(staging, t.ready, 0));
    ASTERIA_CUDA_CHECK(cudaMemcpyAsync(h, x, n * sizeof(float), cudaMemcpyDeviceToHost, staging));
    ASTERIA_CUDA_CHECK(cudaStreamSynchronize(staging));
    blockmath::to_double(static_cast<int64_t>(n), h, host);
  }
  void from_host_double(float* x, const double* host, size_t n) const override {
    std::vector<float>& h = thread_memory().host;
    cuda::synchronize_current_stream();   // an earlier upload may still read h
    h.resize(n);
    blockmath::to_float(static_cast<int64_t>(n), host, h.data());
    from_host(x, h.data(), n);
  }

  void copy(float* dst, const float* src, size_t n) const override {
    if (n) ASTERIA_CUDA_CHECK(cudaMemcpyAsync(dst, src, n * sizeof(float), cudaMemcpyDeviceToDevice, current_stream()));
  }

  bool scaled_copy_finite(const float* src, int64_t ld, int64_t rows, int64_t cols, float scale,
                          float* dst) const override {
    const int64_t n = rows * cols;
    if (n == 0) return true;
    int* flag = thread_memory().flag.data();
    ASTERIA_CUDA_CHECK(cudaMemsetAsync(flag, 0, sizeof(int), current_stream()));
    scaled_copy_kernel<<<grid_for(n), 256, 0, current_stream()>>>(src, ld, rows, cols, scale, dst, flag);
    ASTERIA_CUDA_LAUNCH_CHECK();
    int non_finite = 0;
    cuda::copy_to_host(&non_finite, flag, sizeof(int));
    return non_finite == 0;
  }
  void scale(float* x, size_t n, float s) const override {
    if (n == 0) return;
    scale_kernel<<<grid_for(static_cast<int64_t>(n)), 256, 0, current_stream()>>>(x, static_cast<int64_t>(n), s);
    ASTERIA_CUDA_LAUNCH_CHECK();
  }

  void mul(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* A, const float* B, float beta,
           float* C) const override {
    cuda::gemm(ta, tb, static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), alpha, A,
               static_cast<int>(ta ? m : k), B, static_cast<int>(tb ? k : n), beta, C, static_cast<int>(n));
  }
  void ema(float* x, const float* y, size_t n, float b, float a) const override {
    if (n == 0) return;
    ema_kernel<<<grid_for(static_cast<int64_t>(n)), 256, 0, current_stream()>>>(x, y, static_cast<int64_t>(n), b, a);
    ASTERIA_CUDA_LAUNCH_CHECK();
  }
  void shampoo_moments(float* M, float* V, const float* G, int64_t mn, float b1, float b2, float m_add,
                       float v_add) const override {
    if (mn == 0) return;
    shampoo_moments_kernel<<<grid_for(mn), 256, 0, current_stream()>>>(M, V, G, mn, b1, b2, m_add, v_add);
    ASTERIA_CUDA_LAUNCH_CHECK();
  }
  double adam_direction(const float* M, const float* V, int64_t mn, float inv_bc1, float inv_bc2, float eps, bool graft,
                        float* A) const override {
    if (mn == 0) return 0;
    adam_direction_kernel<<<grid_for(mn), 256, 0, current_stream()>>>(M, V, mn, inv_bc1, inv_bc2, eps, graft, A);
    ASTERIA_CUDA_LAUNCH_CHECK();
    return sum_of_squares(A, mn);
  }
  double sum_of_squares(const float* x, int64_t n) const override {
    return cuda::sum_of_squares(x, static_cast<size_t>(n));
  }
  void kl_damp(float* P, const float* dL, const float* dR, int64_t m, int64_t n, float damping) const override {
    if (m * n == 0) return;
    kl_damp_kernel<<<grid_for(m * n), 256, 0, current_stream()>>>(P, dL, dR, m, n, damping);
    ASTERIA_CUDA_LAUNCH_CHECK();
  }
  void kl_factor_diagonals(const float* H, const float* dL, const float* dR, int64_t m, int64_t n, double* ldiag,
                           double* rdiag) const override {
    ThreadDeviceMemory& t = thread_memory();
    if (t.diagonals.size() < static_cast<size_t>(m + n)) {
      cuda::synchronize_current_stream();
      t.diagonals.resize(static_cast<size_t>(m + n));
    }
    double* d = t.diagonals.data();
    if (m > 0) kl_diagonal_kernel<<<grid_for(m), 256, 0, current_stream()>>>(H, dR, m, n, n, 1, d);
    if (n > 0) kl_diagonal_kernel<<<grid_for(n), 256, 0, current_stream()>>>(H, dL, n, m, 1, n, d + m);
    ASTERIA_CUDA_LAUNCH_CHECK();
    cuda::copy_to_host(ldiag, d, static_cast<size_t>(m) * sizeof(double));
    cuda::copy_to_host(rdiag, d + m, static_cast<size_t>(n) * sizeof(double));
  }
  void scale_columns(float* X, const float* s, int64_t m, int64_t n) const override {
    if (m * n == 0) return;
    scale_columns_kernel<<<grid_for(m * n), 256, 0, current_stream()>>>(X, s, m, n);
    ASTERIA_CUDA_LAUNCH_CHECK();
  }
  void scale_rows(float* X, const float* s, int64_t m, int64_t n) const override {
    if (m * n == 0) return;
    scale_rows_kernel<<<grid_for(m * n), 256, 0, current_stream()>>>(X, s, m, n);
    ASTERIA_CUDA_LAUNCH_CHECK();
  }

  void accumulate_left(const float* G, int64_t m, int64_t n, float beta, float scale, float* L) const override {
    blockmath::cuda::accumulate_left(G, m, n, beta, scale, L);
  }
  void accumulate_right(const float* G, int64_t m, int64_t n, float beta, float scale, float* R) const override {
    blockmath::cuda::accumulate_right(G, m, n, beta, scale, R);
  }
  void to_basis(const float* QL, const float* X, const float* QR, int64_t m, int64_t n, float* tmp,
                float* out) const override {
    blockmath::cuda::to_basis(QL, X, QR, m, n, tmp, out);
  }
  void from_basis(const float* QL, const float* X, const float* QR, int64_t m, int64_t n, float* tmp,
                  float* out) const override {
    blockmath::cuda::from_basis(QL, X, QR, m, n, tmp, out);
  }
  void soap_moments(float* M, float* V, float* G, int64_t mn, float b1, float b2, float a1, float a2,
                    float eps) const override {
    blockmath::cuda::soap_moments(M, V, G, mn, b1, b2, a1, a2, eps);
  }
  void use_background_stream() const override {
    // The thread's current stream for the rest of its life (its handles follow the current one).
    thread_local const cuda::StreamScope scope(new_background_stream());
  }
  bool qr_refresh(matfn::Precision precision, int n, const double* L, double* Q, std::vector<int>& perm, bool sort,
                  matfn::Status& status) const override {
    status = refresh_on_device(precision, n, L, Q, Q, [&](auto* factor, auto* basis) {
      return matfn::cuda::qr_refresh(n, factor, basis, perm, sort);
    });
    return true;
  }
  bool inverse_root(matfn::Precision precision, int n, const double* A, double p, double eps, double* out,
                    matfn::Status& status) const override {
    status = refresh_on_device(precision, n, A, nullptr, out, [&](auto* factor, auto* root) {
      return matfn::cuda::inverse_root_eigh(n, factor, p, eps, root);
    });
    return true;
  }

  matfn::Status initial_eigenbasis(int64_t d, const float* F, float* Q, matfn::Precision precision) const override {
    if (d == 0) return matfn::Status::Ok;
    const size_t dd = static_cast<size_t>(d * d);
    // Eigenvalues (d) and the ascending eigenvectors (d x d) in the direction's scratch slot,
    // which no step uses at the first call.
    float* w = scratch(kDirectionSlot, dd + static_cast<size_t>(d));
    float* V = w + d;
    matfn::Status s;
    if (precision == matfn::Precision::Float64) {
      // In fp64, as the host computes it with this precision: F widened, the vectors narrowed.
      double* f64 = refresh_memory(2 * dd + static_cast<size_t>(d));
      double* v64 = f64 + dd;
      const int64_t n = static_cast<int64_t>(dd);
      convert_kernel<<<grid_for(n), 256, 0, current_stream()>>>(F, n, f64);
      ASTERIA_CUDA_LAUNCH_CHECK();
      s = matfn::cuda::eigh<double>(static_cast<int>(d), f64, v64 + dd, v64);
      if (s == matfn::Status::Ok) {
        convert_kernel<<<grid_for(n), 256, 0, current_stream()>>>(v64, n, V);
        ASTERIA_CUDA_LAUNCH_CHECK();
      }
    } else {
      s = matfn::cuda::eigh<float>(static_cast<int>(d), F, w, V);
    }
    if (s == matfn::Status::Ok) {
      std::vector<int> rows(static_cast<size_t>(d)), reversed(static_cast<size_t>(d));
      for (int64_t i = 0; i < d; ++i) {
        rows[i] = static_cast<int>(i);
        reversed[i] = static_cast<int>(d - 1 - i);
      }
      permute(V, rows, reversed, d, d, Q);
      return s;
    }
    // The host's rule (fp64 included) on a copy.
    std::vector<float> f(dd), q(dd);
    to_host(f.data(), F, dd);
    s = host_block_backend().initial_eigenbasis(d, f.data(), q.data(), precision);
    from_host(Q, q.data(), dd);
    cuda::synchronize_current_stream();   // q is freed on return
    return s;
  }
  void permute(const float* X, const std::vector<int>& row_perm, const std::vector<int>& col_perm, int64_t m,
               int64_t n, float* out) const override {
    if (m * n == 0) return;
    ThreadDeviceMemory& t = thread_memory();
    if (t.perms.size() < static_cast<size_t>(m + n)) {
      cuda::synchronize_current_stream();
      t.perms.resize(static_cast<size_t>(m + n));
    }
    cuda::copy_to_device(t.perms.data(), row_perm.data(), static_cast<size_t>(m) * sizeof(int));
    cuda::copy_to_device(t.perms.data() + m, col_perm.data(), static_cast<size_t>(n) * sizeof(int));
    permute_kernel<<<grid_for(m * n), 256, 0, current_stream()>>>(X, t.perms.data(), t.perms.data() + m, m, n, out);
    ASTERIA_CUDA_LAUNCH_CHECK();
  }

  void apply_update(float* w, float* c, int64_t ld, const float* D, int64_t rows, int64_t cols, float lr,
                    float lr_wd, bool decay_first) const override {
    if (rows * cols == 0) return;
    apply_update_kernel<<<grid_for(rows * cols), 256, 0, current_stream()>>>(w, c, ld, D, rows, cols, lr, lr_wd,
                                                                             decay_first);
    ASTERIA_CUDA_LAUNCH_CHECK();
  }
  void adamw_update(float* w, float* c, float* m, float* v, const float* g, float grad_scale, size_t n,
                    const AdamWCoefficients& k) const override {
    cuda::adamw_update(w, c, m, v, g, grad_scale, n, k);
  }
};

}  // namespace

const BlockBackend& cuda_block_backend() {
  static const CudaBlockBackend backend;
  return backend;
}

}  // namespace asteria
