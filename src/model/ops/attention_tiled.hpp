#pragma once
// Causal multi-head self-attention that keeps no T x T matrix (the FlashAttention scheme, on CPU):
// the forward saves, per query row, the softmax statistics (row max m and 1 / row sum) instead of
// the probabilities; the backward recomputes each block of kAttentionRowBlock query rows'
// probabilities P = exp(S - m) / sum from Q K^T and the statistics, and uses them at once.
// Memory per thread: two [kAttentionRowBlock, T] slabs (scores, their gradient), L2-sized for
// T <= 2048; saved per layer: 2 * B * NH * T floats instead of B * NH * T * T.
//
// The same operations as attention.hpp (causal_softmax.hpp is shared), so the results agree with
// it within fp32 rounding: vectorized row sums may start at other alignments, and dK / dV are
// summed one row block at a time. The backward's probabilities are those of this forward,
// elementwise from the saved statistics.
// Layouts of qkv, out, dqkv, dout: as in attention.hpp.
#include <cstddef>

namespace asteria::ops {

// Elements of the per-thread scratch one thread of these kernels needs.
size_t attention_tiled_scratch_per_thread(int seq_len);

// stats [B, NH, 2, T]: the row max, then 1 / row sum of exp(s - max), of every query row.
// scratch: n_scratch * attention_tiled_scratch_per_thread(seq_len) elements.
template <class T>
void attention_tiled_forward(T* out, T* stats, T* scratch, int n_scratch, const T* qkv, int B,
                             int seq_len, int C, int NH);

// dqkv [B, T, 3C] (overwritten) from dout [B, T, C]; qkv and stats as saved by the forward.
template <class T>
void attention_tiled_backward(T* dqkv, T* scratch, int n_scratch, const T* dout, const T* qkv,
                              const T* stats, int B, int seq_len, int C, int NH);

// The CUDA backend's kernels (ops/cuda/attention_tiled.cu): the same contract and statistics on
// device pointers, on the calling thread's current stream; scratch is not used (pass null, 0).
// Defined for float in builds with the CUDA backend; head sizes 16, 32, 64, 128.
namespace cuda {

template <class T>
void attention_tiled_forward(T* out, T* stats, T* scratch, int n_scratch, const T* qkv, int B,
                             int seq_len, int C, int NH);

template <class T>
void attention_tiled_backward(T* dqkv, T* scratch, int n_scratch, const T* dout, const T* qkv,
                              const T* stats, int B, int seq_len, int C, int NH);

}  // namespace cuda

}  // namespace asteria::ops
