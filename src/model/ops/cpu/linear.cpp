#include "model/ops/linear.hpp"

#include <initializer_list>
#include <utility>

#include "core/buffer.hpp"
#include "core/cpu/gemm.hpp"
#include "model/ops/bf16_storage.hpp"

namespace asteria::ops {

namespace {

// bf16-rounded copies of up to three operands, side by side in the calling thread's workspace:
// each rounded from its fp32 values, or widened from its bf16 copy when it has one.
struct Bf16Copies {
  const float* p[3] = {};
};

struct Operand {
  const float* values;
  const uint16_t* bf16;   // its bf16 copy, or null
  size_t n;
};

Bf16Copies rounded_copies(std::initializer_list<Operand> operands) {
  thread_local Buffer<float> workspace;
  size_t total = 0;
  for (const Operand& o : operands) total += (o.n + 15) / 16 * 16;
  if (workspace.size() < total) workspace.resize(total);
  Bf16Copies out;
  float* w = workspace.data();
  int i = 0;
  for (const Operand& o : operands) {
    out.p[i++] = w;
    if (o.bf16) {
      unpack_bf16(w, o.bf16, o.n);
    } else {
      round_to_bf16(w, o.values, o.n);
    }
    w += (o.n + 15) / 16 * 16;
  }
  return out;
}

// bf16 bits of up to three operands, side by side in the calling thread's workspace (grown
// once, then reused): each packed from its fp32 values, or its bf16 copy read in place.
struct Bf16Operands {
  const uint16_t* p[3] = {};
};

Bf16Operands packed_operands(std::initializer_list<Operand> operands) {
  thread_local Buffer<uint16_t> workspace;
  size_t total = 0;
  for (const Operand& o : operands)
    if (!o.bf16) total += (o.n + 31) / 32 * 32;
  if (workspace.size() < total) workspace.resize(total);
  Bf16Operands out;
  uint16_t* w = workspace.data();
  int i = 0;
  for (const Operand& o : operands) {
    if (o.bf16) {
      out.p[i++] = o.bf16;
      continue;
    }
    out.p[i++] = w;
    pack_bf16(w, o.values, o.n);
    w += (o.n + 31) / 32 * 32;
  }
  return out;
}

}  // namespace

template <class T>
void linear_forward(T* out, const T* inp, const T* weight, int N, int IC, int OC,
                    bool accumulate) {
  cpu::gemm(false, true, N, OC, IC, T(1), inp, IC, weight, IC, accumulate ? T(1) : T(0), out, OC);
}

template <class T>
void linear_backward(T* dinp, T* dweight, const T* dout, const T* inp, const T* weight, int N,
                     int IC, int OC, T scale, bool accumulate_dinp) {
  if (dinp)
    cpu::gemm(false, false, N, IC, OC, T(1), dout, OC, weight, IC, accumulate_dinp ? T(1) : T(0),
              dinp, IC);
  cpu::gemm(true, false, OC, IC, N, scale, dout, OC, inp, IC, T(1), dweight, IC);
}

void linear_forward_bf16(float* out, const float* inp, const float* weight, const uint16_t* weight_bf16, int N, int IC,
                         int OC, bool accumulate) {
  if (!cpu::bf16_gemm_available()) {
    const Bf16Copies h = rounded_copies({{inp, nullptr, size_t(N) * IC}, {weight, weight_bf16, size_t(OC) * IC}});
    linear_forward(out, h.p[0], h.p[1], N, IC, OC, accumulate);
    return;
  }
  const Bf16Operands h = packed_operands({{inp, nullptr, size_t(N) * IC}, {weight, weight_bf16, size_t(OC) * IC}});
  cpu::gemm_bf16(false, true, N, OC, IC, 1.f, h.p[0], IC, h.p[1], IC, accumulate ? 1.f : 0.f, out, OC);
}

void linear_backward_bf16(float* dinp, float* dweight, const float* dout, const float* inp, const float* weight,
                          const uint16_t* weight_bf16, int N, int IC, int OC, float scale, bool accumulate_dinp) {
  const size_t weight_n = dinp ? size_t(OC) * IC : 0;
  if (!cpu::bf16_gemm_available()) {
    const Bf16Copies h = rounded_copies(
        {{dout, nullptr, size_t(N) * OC}, {inp, nullptr, size_t(N) * IC}, {weight, weight_bf16, weight_n}});
    linear_backward(dinp, dweight, h.p[0], h.p[1], h.p[2], N, IC, OC, scale, accumulate_dinp);
    return;
  }
  const Bf16Operands h = packed_operands(
      {{dout, nullptr, size_t(N) * OC}, {inp, nullptr, size_t(N) * IC}, {weight, weight_bf16, weight_n}});
  if (dinp)
    cpu::gemm_bf16(false, false, N, IC, OC, 1.f, h.p[0], OC, h.p[2], IC, accumulate_dinp ? 1.f : 0.f, dinp, IC);
  cpu::gemm_bf16(true, false, OC, IC, N, scale, h.p[0], OC, h.p[1], IC, 1.f, dweight, IC);
}

template void linear_forward<float>(float*, const float*, const float*, int, int, int, bool);
template void linear_forward<double>(double*, const double*, const double*, int, int, int, bool);
template void linear_backward<float>(float*, float*, const float*, const float*, const float*,
                                     int, int, int, float, bool);
template void linear_backward<double>(double*, double*, const double*, const double*,
                                      const double*, int, int, int, double, bool);

}  // namespace asteria::ops
