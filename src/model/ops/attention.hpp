#pragma once
// Causal multi-head self-attention over a fused qkv buffer (after QK-norm and RoPE):
//   S = Q K^T / sqrt(hd), P = softmax(S) over keys j <= t, out = P V
// Work is one task per (batch, head) in an OpenMP loop; inside, GEMMs on strided views of the
// [B, T, 3C] buffer (lda = 3C, no copies), which OpenBLAS runs single-threaded inside the
// parallel region. Rows are processed in blocks of kAttentionRowBlock so the masked upper
// triangle outside the diagonal blocks is never computed.

namespace asteria::ops {

constexpr int kAttentionRowBlock = 64;

// qkv [B, T, 3C]: row = [q | k | v], head h at columns h*hd .. h*hd + hd of each part.
// out [B, T, C]: head h at columns h*hd.
// att [B, NH, T, T]: softmax probabilities, saved for backward (entries above the diagonal
//   inside diagonal blocks are 0; entries right of a row's diagonal block are not written).
template <class T>
void attention_forward(T* out, T* att, const T* qkv, int B, int seq_len, int C, int NH);

// dqkv [B, T, 3C] (overwritten) from dout [B, T, C]; qkv and att as saved by forward.
// scratch [n_scratch, T, T]: one T x T slab per thread; at most n_scratch threads are used.
template <class T>
void attention_backward(T* dqkv, T* scratch, int n_scratch, const T* dout, const T* qkv,
                        const T* att, int B, int seq_len, int C, int NH);

// The CUDA backend's op (ops/cuda/attention.cu): the same contract on device pointers, queued on
// the calling thread's current stream (core/cuda/cuda_context.hpp). Defined for float in builds
// with the CUDA backend.
namespace cuda {

template <class T>
void attention_forward(T* out, T* att, const T* qkv, int B, int seq_len, int C, int NH);

template <class T>
void attention_backward(T* dqkv, T* scratch, int n_scratch, const T* dout, const T* qkv,
                        const T* att, int B, int seq_len, int C, int NH);

}  // namespace cuda

}  // namespace asteria::ops
