#include "model/ops/attention.hpp"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstddef>

#include "core/cpu/gemm.hpp"
#include "model/ops/causal_softmax.hpp"
#include "model/ops/parallel.hpp"

namespace asteria::ops {

template <class T>
void attention_forward(T* out, T* att, const T* qkv, int B, int seq_len, int C, int NH) {
  const int Tn = seq_len, hd = C / NH, ld = 3 * C;
  const T scale = T(1) / std::sqrt(static_cast<T>(hd));
#pragma omp parallel for schedule(dynamic, 1) \
    if (worth_parallel(size_t(B) * NH * seq_len * seq_len * hd))
  for (int bh = 0; bh < B * NH; bh++) {
    const int b = bh / NH, h = bh % NH;
    const T* q = qkv + static_cast<size_t>(b) * Tn * ld + static_cast<size_t>(h) * hd;  // [T, hd] ld
    const T* k = q + C;                                                                 // [T, hd] ld
    const T* v = q + 2 * C;                                                             // [T, hd] ld
    T* p = att + static_cast<size_t>(bh) * Tn * Tn;                                     // [T, T]
    T* o = out + static_cast<size_t>(b) * Tn * C + static_cast<size_t>(h) * hd;         // [T, hd] ld C
    for (int r0 = 0; r0 < Tn; r0 += kAttentionRowBlock) {
      const int r1 = std::min(Tn, r0 + kAttentionRowBlock), rows = r1 - r0;
      // S[r0:r1, 0:r1] = scale * Q[r0:r1] K[0:r1]^T
      cpu::gemm(false, true, rows, r1, hd, scale, q + static_cast<size_t>(r0) * ld, ld, k, ld, T(0),
                p + static_cast<size_t>(r0) * Tn, Tn);
      causal_softmax_rows(p + static_cast<size_t>(r0) * Tn, Tn, r0, r1);
      // out[r0:r1] = P[r0:r1, 0:r1] V[0:r1]
      cpu::gemm(false, false, rows, hd, r1, T(1), p + static_cast<size_t>(r0) * Tn, Tn, v, ld, T(0),
                o + static_cast<size_t>(r0) * C, C);
    }
  }
}

template <class T>
void attention_backward(T* dqkv, T* scratch, int n_scratch, const T* dout, const T* qkv,
                        const T* att, int B, int seq_len, int C, int NH) {
  const int Tn = seq_len, hd = C / NH, ld = 3 * C;
  const T scale = T(1) / std::sqrt(static_cast<T>(hd));
#pragma omp parallel for schedule(dynamic, 1) num_threads(n_scratch) \
    if (worth_parallel(size_t(B) * NH * seq_len * seq_len * hd))
  for (int bh = 0; bh < B * NH; bh++) {
    const int b = bh / NH, h = bh % NH;
    const size_t head_off = static_cast<size_t>(b) * Tn * ld + static_cast<size_t>(h) * hd;
    const T* q = qkv + head_off;                         // [T, hd] ld
    const T* k = q + C;                                  // [T, hd] ld
    const T* v = q + 2 * C;                              // [T, hd] ld
    T* dq = dqkv + head_off;                             // [T, hd] ld
    T* dk = dq + C;                                      // [T, hd] ld
    T* dv = dq + 2 * C;                                  // [T, hd] ld
    const T* p = att + static_cast<size_t>(bh) * Tn * Tn;  // [T, T]
    const T* dO = dout + static_cast<size_t>(b) * Tn * C + static_cast<size_t>(h) * hd;  // [T, hd] ld C
    T* ds = scratch + static_cast<size_t>(omp_get_thread_num()) * Tn * Tn;  // [T, T]

    for (int r0 = 0; r0 < Tn; r0 += kAttentionRowBlock) {
      const int r1 = std::min(Tn, r0 + kAttentionRowBlock), rows = r1 - r0;
      // dP[r0:r1, 0:r1] = dO[r0:r1] V[0:r1]^T, then the softmax backward (P is 0 above the
      // diagonal, so dS is too)
      cpu::gemm(false, true, rows, r1, hd, T(1), dO + static_cast<size_t>(r0) * C, C, v, ld, T(0),
                ds + static_cast<size_t>(r0) * Tn, Tn);
      causal_softmax_backward_rows(p + static_cast<size_t>(r0) * Tn, ds + static_cast<size_t>(r0) * Tn,
                                   Tn, r0, r1);
      // dQ[r0:r1] = scale * dS[r0:r1, 0:r1] K[0:r1]
      cpu::gemm(false, false, rows, hd, r1, scale, ds + static_cast<size_t>(r0) * Tn, Tn, k, ld,
                T(0), dq + static_cast<size_t>(r0) * ld, ld);
    }
    // Keys/values in blocks of columns: only query rows i >= c0 attend to them.
    for (int c0 = 0; c0 < Tn; c0 += kAttentionRowBlock) {
      const int c1 = std::min(Tn, c0 + kAttentionRowBlock), cols = c1 - c0;
      const size_t diag = static_cast<size_t>(c0) * Tn + c0;
      // dK[c0:c1] = scale * dS[c0:T, c0:c1]^T Q[c0:T]
      cpu::gemm(true, false, cols, hd, Tn - c0, scale, ds + diag, Tn,
                q + static_cast<size_t>(c0) * ld, ld, T(0), dk + static_cast<size_t>(c0) * ld, ld);
      // dV[c0:c1] = P[c0:T, c0:c1]^T dO[c0:T]
      cpu::gemm(true, false, cols, hd, Tn - c0, T(1), p + diag, Tn,
                dO + static_cast<size_t>(c0) * C, C, T(0), dv + static_cast<size_t>(c0) * ld, ld);
    }
  }
}

template void attention_forward<float>(float*, float*, const float*, int, int, int, int);
template void attention_forward<double>(double*, double*, const double*, int, int, int, int);
template void attention_backward<float>(float*, float*, int, const float*, const float*,
                                        const float*, int, int, int, int);
template void attention_backward<double>(double*, double*, int, const double*, const double*,
                                         const double*, int, int, int, int);

}  // namespace asteria::ops
