// Causal attention on CUDA without a T x T matrix (contract: ops/attention_tiled.hpp; the same
// statistics as the CPU kernel: per query row the max of the scaled scores and 1 / sum of
// exp(s - max), in stats [B, NH, 2, T]). FlashAttention's scheme in plain fp32 (no tensor cores
// yet): one thread per query row (forward, dQ) or key row (dK, dV), 64 rows per block, the other
// side streamed through shared memory in tiles of 32 rows.
//   forward : online softmax over the key tiles up to the diagonal; out and stats.
//   backward: dq kernel, per query t: D_t = sum_j p_tj dP_tj (one pass over the keys), then
//             dQ_t = scale sum_j p_tj (dP_tj - D_t) k_j (a second pass), p from the stats;
//             dkdv kernel, per key j, over the queries t >= j: dV_j = sum_t p_tj dO_t,
//             dK_j = scale sum_t p_tj (dP_tj - D_t) q_t, with D from the dq kernel.
// No atomics: every output element is summed by one thread in a fixed order (deterministic).
// Head sizes 16, 32, 64 and 128 (compile-time: the row vectors live in registers).
// The scratch argument of the CPU signature is not used; D lives in the thread's workspace.
#include "model/ops/attention_tiled.hpp"
#include "model/ops/cuda/kernel_util.cuh"

namespace asteria::ops::cuda {

using namespace cuda_detail;

namespace {

constexpr int kRows = 64;   // rows (threads) per block
constexpr int kTile = 32;   // rows of the other side per shared-memory tile

// Loads rows [r0, r0 + kTile) of a [T, HD] view with row stride ld into tile (stride HD + 1,
// which keeps a column's reads off one bank); rows past T are zero.
template <int HD>
__device__ inline void load_tile(float (*tile)[HD + 1], const float* src, int ld, int r0, int T) {
  for (int i = threadIdx.x; i < kTile * HD; i += blockDim.x) {
    const int r = i / HD, d = i % HD;
    tile[r][d] = r0 + r < T ? src[static_cast<size_t>(r0 + r) * ld + d] : 0.0f;
  }
}

template <int HD>
__device__ inline float dot(const float* a, const float* b) {
  float s = 0;
#pragma unroll
  for (int d = 0; d < HD; d++) s += a[d] * b[d];
  return s;
}

template <int HD>
__global__ void __launch_bounds__(kRows) flash_forward(float* out, float* stats, const float* qkv, int T, int C, int NH,
                                                       float scale) {
  __shared__ float ks[kTile][HD + 1], vs[kTile][HD + 1];
  const int b = blockIdx.y / NH, h = blockIdx.y % NH, ld = 3 * C;
  const int r0 = blockIdx.x * kRows, t = r0 + threadIdx.x;
  const float* q_base = qkv + static_cast<size_t>(b) * T * ld + static_cast<size_t>(h) * HD;
  float q[HD], acc[HD];
#pragma unroll
  for (int d = 0; d < HD; d++) {
    q[d] = t < T ? q_base[static_cast<size_t>(t) * ld + d] : 0.0f;
    acc[d] = 0;
  }
  float m = -INFINITY, l = 0;
  const int keys = min(T, r0 + kRows);   // the block's last row attends to keys < keys
  for (int j0 = 0; j0 < keys; j0 += kTile) {
    __syncthreads();
    load_tile<HD>(ks, q_base + C, ld, j0, T);
    load_tile<HD>(vs, q_base + 2 * C, ld, j0, T);
    __syncthreads();
    if (t >= T) continue;
    for (int jj = 0; jj < kTile && j0 + jj <= t; jj++) {
      const float s = scale * dot<HD>(q, ks[jj]);
      if (s > m) {
        const float corr = expf(m - s);   // 0 on the first key (m = -inf)
        l *= corr;
#pragma unroll
        for (int d = 0; d < HD; d++) acc[d] *= corr;
        m = s;
      }
      const float p = expf(s - m);
      l += p;
#pragma unroll
      for (int d = 0; d < HD; d++) acc[d] += p * vs[jj][d];
    }
  }
  if (t >= T) return;
  const float inv = 1.0f / l;
  float* o = out + (static_cast<size_t>(b) * T + t) * C + static_cast<size_t>(h) * HD;
#pragma unroll
  for (int d = 0; d < HD; d++) o[d] = acc[d] * inv;
  float* st = stats + static_cast<size_t>(blockIdx.y) * 2 * T;
  st[t] = m;
  st[T + t] = inv;
}

template <int HD>
__global__ void __launch_bounds__(kRows) flash_backward_dq(float* dqkv, float* row_dot, const float* dout,
                                                           const float* qkv, const float* stats, int T, int C, int NH,
                                                           float scale) {
  __shared__ float ks[kTile][HD + 1], vs[kTile][HD + 1];
  const int b = blockIdx.y / NH, h = blockIdx.y % NH, ld = 3 * C;
  const int r0 = blockIdx.x * kRows, t = r0 + threadIdx.x;
  const size_t head = static_cast<size_t>(b) * T * ld + static_cast<size_t>(h) * HD;
  const float* q_base = qkv + head;
  const float* do_row = dout + (static_cast<size_t>(b) * T + t) * C + static_cast<size_t>(h) * HD;
  float q[HD], g[HD], acc[HD];
#pragma unroll
  for (int d = 0; d < HD; d++) {
    q[d] = t < T ? q_base[static_cast<size_t>(t) * ld + d] : 0.0f;
    g[d] = t < T ? do_row[d] : 0.0f;
    acc[d] = 0;
  }
  const float* st = stats + static_cast<size_t>(blockIdx.y) * 2 * T;
  const float m = t < T ? st[t] : 0.0f, inv = t < T ? st[T + t] : 0.0f;
  const int keys = min(T, r0 + kRows);
  float D = 0;
  for (int pass = 0; pass < 2; pass++) {
    for (int j0 = 0; j0 < keys; j0 += kTile) {
      __syncthreads();
      load_tile<HD>(ks, q_base + C, ld, j0, T);
      load_tile<HD>(vs, q_base + 2 * C, ld, j0, T);
      __syncthreads();
      if (t >= T) continue;
      for (int jj = 0; jj < kTile && j0 + jj <= t; jj++) {
        const float p = expf(scale * dot<HD>(q, ks[jj]) - m) * inv;
        const float dp = dot<HD>(g, vs[jj]);
        if (pass == 0) {
          D += p * dp;
        } else {
          const float ds = p * (dp - D);
#pragma unroll
          for (int d = 0; d < HD; d++) acc[d] += ds * ks[jj][d];
        }
      }
    }
  }
  if (t >= T) return;
  row_dot[static_cast<size_t>(blockIdx.y) * T + t] = D;
  float* dq = dqkv + head + static_cast<size_t>(t) * ld;
#pragma unroll
  for (int d = 0; d < HD; d++) dq[d] = scale * acc[d];
}

template <int HD>
__global__ void __launch_bounds__(kRows) flash_backward_dkdv(float* dqkv, const float* row_dot, const float* dout,
                                                             const float* qkv, const float* stats, int T, int C, int NH,
                                                             float scale) {
  __shared__ float qs[kTile][HD + 1], gs[kTile][HD + 1];
  __shared__ float ms[kTile], invs[kTile], Ds[kTile];
  const int b = blockIdx.y / NH, h = blockIdx.y % NH, ld = 3 * C;
  const int c0 = blockIdx.x * kRows, j = c0 + threadIdx.x;
  const size_t head = static_cast<size_t>(b) * T * ld + static_cast<size_t>(h) * HD;
  const float* q_base = qkv + head;
  const float* do_base = dout + static_cast<size_t>(b) * T * C + static_cast<size_t>(h) * HD;
  const float* st = stats + static_cast<size_t>(blockIdx.y) * 2 * T;
  const float* dd = row_dot + static_cast<size_t>(blockIdx.y) * T;
  float k[HD], v[HD], dk[HD], dv[HD];
#pragma unroll
  for (int d = 0; d < HD; d++) {
    k[d] = j < T ? q_base[static_cast<size_t>(j) * ld + C + d] : 0.0f;
    v[d] = j < T ? q_base[static_cast<size_t>(j) * ld + 2 * C + d] : 0.0f;
    dk[d] = dv[d] = 0;
  }
  // Queries before c0 attend to none of this block's keys.
  for (int t0 = c0 / kTile * kTile; t0 < T; t0 += kTile) {
    __syncthreads();
    load_tile<HD>(qs, q_base, ld, t0, T);
    load_tile<HD>(gs, do_base, C, t0, T);
    if (threadIdx.x < kTile) {
      const int t = t0 + threadIdx.x;
      ms[threadIdx.x] = t < T ? st[t] : 0.0f;
      invs[threadIdx.x] = t < T ? st[T + t] : 0.0f;
      Ds[threadIdx.x] = t < T ? dd[t] : 0.0f;
    }
    __syncthreads();
    if (j >= T) continue;
    for (int tt = 0; tt < kTile; tt++) {
      const int t = t0 + tt;
      if (t < j || t >= T) continue;
      const float p = expf(scale * dot<HD>(qs[tt], k) - ms[tt]) * invs[tt];
      const float ds = p * (dot<HD>(gs[tt], v) - Ds[tt]);
#pragma unroll
      for (int d = 0; d < HD; d++) {
        dv[d] += p * gs[tt][d];
        dk[d] += ds * qs[tt][d];
      }
    }
  }
  if (j >= T) return;
  float* out = dqkv + head + static_cast<size_t>(j) * ld;
#pragma unroll
  for (int d = 0; d < HD; d++) {
    out[C + d] = scale * dk[d];
    out[2 * C + d] = dv[d];
  }
}

// Calls f.template operator()<HD>() for the model's head size.
template <class F>
void with_head_dim(int hd, F&& f) {
  switch (hd) {
    case 16: return f.template operator()<16>();
    case 32: return f.template operator()<32>();
    case 64: return f.template operator()<64>();
    case 128: return f.template operator()<128>();
    default: fail("the CUDA tiled attention supports head sizes 16, 32, 64 and 128, not ", hd);
  }
}

}  // namespace

template <>
void attention_tiled_forward<float>(float* out, float* stats, float*, int, const float* qkv, int B, int T, int C,
                                    int NH) {
  if (B == 0 || T == 0) return;
  const int hd = C / NH;
  const float scale = 1.0f / sqrtf(static_cast<float>(hd));
  const dim3 grid((T + kRows - 1) / kRows, B * NH);
  cudaStream_t s = asteria::cuda::current_stream();
  with_head_dim(hd, [&]<int HD>() {
    flash_forward<HD><<<grid, kRows, 0, s>>>(out, stats, qkv, T, C, NH, scale);
    ASTERIA_CUDA_LAUNCH_CHECK();
  });
}

template <>
void attention_tiled_backward<float>(float* dqkv, float*, int, const float* dout, const float* qkv, const float* stats,
                                     int B, int T, int C, int NH) {
  if (B == 0 || T == 0) return;
  const int hd = C / NH;
  const float scale = 1.0f / sqrtf(static_cast<float>(hd));
  const dim3 grid((T + kRows - 1) / kRows, B * NH);
  cudaStream_t s = asteria::cuda::current_stream();
  float* row_dot = static_cast<float*>(asteria::cuda::thread_workspace(sizeof(float) * B * NH * T));
  with_head_dim(hd, [&]<int HD>() {
    flash_backward_dq<HD><<<grid, kRows, 0, s>>>(dqkv, row_dot, dout, qkv, stats, T, C, NH, scale);
    ASTERIA_CUDA_LAUNCH_CHECK();
    flash_backward_dkdv<HD><<<grid, kRows, 0, s>>>(dqkv, row_dot, dout, qkv, stats, T, C, NH, scale);
    ASTERIA_CUDA_LAUNCH_CHECK();
  });
}

}  // namespace asteria::ops::cuda
