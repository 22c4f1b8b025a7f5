#include "model/ops/attention_tiled.hpp"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/cpu/gemm.hpp"
#include "model/ops/attention.hpp"
#include "model/ops/causal_softmax.hpp"
#include "model/ops/parallel.hpp"

namespace asteria::ops {

size_t attention_tiled_scratch_per_thread(int seq_len) {
  return 2 * static_cast<size_t>(kAttentionRowBlock) * seq_len;  // scores and their gradient
}

template <class T>
void attention_tiled_forward(T* out, T* stats, T* scratch, int n_scratch, const T* qkv, int B,
                             int seq_len, int C, int NH) {
  const int Tn = seq_len, hd = C / NH, ld = 3 * C;
  const T scale = T(1) / std::sqrt(static_cast<T>(hd));
  const size_t per_thread = attention_tiled_scratch_per_thread(Tn);
#pragma omp parallel for schedule(dynamic, 1) num_threads(n_scratch) \
    if (worth_parallel(size_t(B) * NH * seq_len * seq_len * hd))
  for (int bh = 0; bh < B * NH; bh++) {
    const int b = bh / NH, h = bh % NH;
    const T* q = qkv + static_cast<size_t>(b) * Tn * ld + static_cast<size_t>(h) * hd;  // [T, hd] ld
    const T* k = q + C;                                                                 // [T, hd] ld
    const T* v = q + 2 * C;                                                             // [T, hd] ld
    T* o = out + static_cast<size_t>(b) * Tn * C + static_cast<size_t>(h) * hd;         // [T, hd] ld C
    T* row_max = stats + static_cast<size_t>(bh) * 2 * Tn;                              // [T]
    T* row_inv = row_max + Tn;                                                          // [T]
    T* p = scratch + static_cast<size_t>(omp_get_thread_num()) * per_thread;            // [rows, T]
    for (int r0 = 0; r0 < Tn; r0 += kAttentionRowBlock) {
      const int r1 = std::min(Tn, r0 + kAttentionRowBlock), rows = r1 - r0;
      // S[r0:r1, 0:r1] = scale * Q[r0:r1] K[0:r1]^T, then softmax in place
      cpu::gemm(false, true, rows, r1, hd, scale, q + static_cast<size_t>(r0) * ld, ld, k, ld, T(0),
                p, Tn);
      causal_softmax_rows(p, Tn, r0, r1, row_max, row_inv);
      // out[r0:r1] = P[r0:r1, 0:r1] V[0:r1]
      cpu::gemm(false, false, rows, hd, r1, T(1), p, Tn, v, ld, T(0),
                o + static_cast<size_t>(r0) * C, C);
    }
  }
}

template <class T>
void attention_tiled_backward(T* dqkv, T* scratch, int n_scratch, const T* dout, const T* qkv,
                              const T* stats, int B, int seq_len, int C, int NH) {
  const int Tn = seq_len, hd = C / NH, ld = 3 * C;
  const T scale = T(1) / std::sqrt(static_cast<T>(hd));
  const size_t per_thread = attention_tiled_scratch_per_thread(Tn);
#pragma omp parallel for schedule(dynamic, 1) num_threads(n_scratch) \
    if (worth_parallel(size_t(B) * NH * seq_len * seq_len * hd))
  for (int bh = 0; bh < B * NH; bh++) {
    const int b = bh / NH, h = bh % NH;
    const size_t head_off = static_cast<size_t>(b) * Tn * ld + static_cast<size_t>(h) * hd;
    const T* q = qkv + head_off;  // [T, hd] ld
    const T* k = q + C;           // [T, hd] ld
    const T* v = q + 2 * C;       // [T, hd] ld
    T* dq = dqkv + head_off;      // [T, hd] ld
    T* dk = dq + C;               // [T, hd] ld
    T* dv = dq + 2 * C;           // [T, hd] ld
    const T* dO = dout + static_cast<size_t>(b) * Tn * C + static_cast<size_t>(h) * hd;  // [T, hd] ld C
    const T* row_max = stats + static_cast<size_t>(bh) * 2 * Tn;
    const T* row_inv = row_max + Tn;
    T* p = scratch + static_cast<size_t>(omp_get_thread_num()) * per_thread;  // [rows, T]
    T* ds = p + static_cast<size_t>(kAttentionRowBlock) * Tn;                 // [rows, T]

    // dK and dV are sums over the query row blocks below.
    for (int t = 0; t < Tn; t++) {
      std::memset(dk + static_cast<size_t>(t) * ld, 0, sizeof(T) * hd);
      std::memset(dv + static_cast<size_t>(t) * ld, 0, sizeof(T) * hd);
    }
    for (int r0 = 0; r0 < Tn; r0 += kAttentionRowBlock) {
      const int r1 = std::min(Tn, r0 + kAttentionRowBlock), rows = r1 - r0;
      const T* q_r = q + static_cast<size_t>(r0) * ld;
      const T* dO_r = dO + static_cast<size_t>(r0) * C;
      // P[r0:r1, 0:r1] recomputed: the forward's scores, then exp(s - max) / sum from the stats.
      cpu::gemm(false, true, rows, r1, hd, scale, q_r, ld, k, ld, T(0), p, Tn);
      causal_softmax_rows_from_stats(p, Tn, r0, r1, row_max, row_inv);
      // dP = dO[r0:r1] V[0:r1]^T, then the softmax backward.
      cpu::gemm(false, true, rows, r1, hd, T(1), dO_r, C, v, ld, T(0), ds, Tn);
      causal_softmax_backward_rows(p, ds, Tn, r0, r1);
      // dQ[r0:r1] = scale * dS K[0:r1];  dK[0:r1] += scale * dS^T Q[r0:r1];  dV[0:r1] += P^T dO[r0:r1]
      cpu::gemm(false, false, rows, hd, r1, scale, ds, Tn, k, ld, T(0),
                dq + static_cast<size_t>(r0) * ld, ld);
      cpu::gemm(true, false, r1, hd, rows, scale, ds, Tn, q_r, ld, T(1), dk, ld);
      cpu::gemm(true, false, r1, hd, rows, T(1), p, Tn, dO_r, C, T(1), dv, ld);
    }
  }
}

template void attention_tiled_forward<float>(float*, float*, float*, int, const float*, int, int,
                                             int, int);
template void attention_tiled_forward<double>(double*, double*, double*, int, const double*, int,
                                              int, int, int);
template void attention_tiled_backward<float>(float*, float*, int, const float*, const float*,
                                              const float*, int, int, int, int);
template void attention_tiled_backward<double>(double*, double*, int, const double*,
                                               const double*, const double*, int, int, int, int);

}  // namespace asteria::ops
