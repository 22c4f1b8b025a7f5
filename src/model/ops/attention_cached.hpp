#pragma once
// Causal attention of n new query rows over a key/value cache (generation, model/decoder.hpp):
// query row i sits at position pos + i and attends to cached positions 0 .. pos + i, whose keys
// and values the caller has already written into the cache (the new rows' included). Per head h
// of size hd = C / NH:
//   out[i, h] = sum_j softmax_j(q[i, h] . k[j, h] / sqrt(hd)) v[j, h],   j <= pos + i
// The same function as the training attention (attention.hpp) at those positions, up to the
// order of the fp32 sums.
namespace asteria::ops {

// out [n, C]; q: the n query rows with row stride ldq (the q third of a qkv row); k_cache and
// v_cache [>= pos + n, C] (row stride C). scratch: n * NH * (pos + n) elements (the scores).
template <class T>
void attention_cached_forward(T* out, const T* q, int ldq, const T* k_cache, const T* v_cache, int n, int pos, int C,
                              int NH, T* scratch);

// The CUDA backend's kernel (ops/cuda/attention_cached.cu): the same contract on device
// pointers, on the calling thread's current stream; scratch is not used (pass null). Defined for
// float in builds with the CUDA backend.
namespace cuda {

template <class T>
void attention_cached_forward(T* out, const T* q, int ldq, const T* k_cache, const T* v_cache, int n, int pos, int C,
                              int NH, T* scratch);

}  // namespace cuda

}  // namespace asteria::ops
