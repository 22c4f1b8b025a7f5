#pragma once
// The causal softmax of one block of score rows, shared by both attention kernels so that they
// compute the same probabilities bit for bit.
#include "model/ops/fast_exp.hpp"

namespace asteria::ops {

// One row in place: softmax over row[0..t], 0 for row[t+1..r1-1]. Returns the row max and
// 1 / sum of exp(row - max). (A row at a time, its statistics returned by value, so that the
// exp loop vectorizes: stores through caller pointers in the loop nest kept it scalar.)
template <class T>
inline void causal_softmax_row(T* row, int t, int r1, T& row_max, T& row_inv) {
  T mx = row[0];
#pragma omp simd reduction(max : mx)
  for (int j = 1; j <= t; j++) mx = row[j] > mx ? row[j] : mx;
  T sum = 0;
#pragma omp simd reduction(+ : sum)
  for (int j = 0; j <= t; j++) {
    const T e = fast_exp(row[j] - mx);
    row[j] = e;
    sum += e;
  }
  const T inv = T(1) / sum;
#pragma omp simd
  for (int j = 0; j <= t; j++) row[j] *= inv;
  for (int j = t + 1; j < r1; j++) row[j] = 0;  // masked, read by the P V product
  row_max = mx;
  row_inv = inv;
}

// s [r1 - r0, ld]: row i holds the scores of query t = r0 + i against keys 0 .. r1 - 1; keys
// j <= t are valid. On exit row i holds softmax over keys 0..t and 0 for keys t < j < r1.
// When row_max / row_inv are given, they receive each row's max and 1 / sum of exp(s - max)
// (indexed by t).
template <class T>
inline void causal_softmax_rows(T* s, int ld, int r0, int r1, T* row_max = nullptr,
                                T* row_inv = nullptr) {
  for (int t = r0; t < r1; t++) {
    T mx, inv;
    causal_softmax_row(s + static_cast<size_t>(t - r0) * ld, t, r1, mx, inv);
    if (row_max) {
      row_max[t] = mx;
      row_inv[t] = inv;
    }
  }
}

// The probabilities of the same rows again from recomputed scores and the saved statistics:
// p = exp(s - max) * inv, exactly the operations causal_softmax_rows applied.
template <class T>
inline void causal_softmax_rows_from_stats(T* s, int ld, int r0, int r1, const T* row_max,
                                           const T* row_inv) {
  for (int t = r0; t < r1; t++) {
    T* row = s + static_cast<size_t>(t - r0) * ld;
    const T mx = row_max[t], inv = row_inv[t];
#pragma omp simd
    for (int j = 0; j <= t; j++) row[j] = fast_exp(row[j] - mx) * inv;
    for (int j = t + 1; j < r1; j++) row[j] = 0;
  }
}

// Softmax backward of the same rows: ds holds dL/dP on entry and dL/dS on exit,
// dS = P * (dP - sum_j P dP) over keys 0..t, and 0 for keys t < j < r1 (P is 0 there).
template <class T>
inline void causal_softmax_backward_rows(const T* p, T* ds, int ld, int r0, int r1) {
  for (int t = r0; t < r1; t++) {
    const T* prow = p + static_cast<size_t>(t - r0) * ld;
    T* drow = ds + static_cast<size_t>(t - r0) * ld;
    T dot = 0;
#pragma omp simd reduction(+ : dot)
    for (int j = 0; j <= t; j++) dot += prow[j] * drow[j];
#pragma omp simd
    for (int j = 0; j <= t; j++) drow[j] = prow[j] * (drow[j] - dot);
    for (int j = t + 1; j < r1; j++) drow[j] = 0;
  }
}

}  // namespace asteria::ops
