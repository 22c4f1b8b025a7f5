#include "model/ops/linear.hpp"

#include <array>
#include <initializer_list>
#include <utility>

#include "core/buffer.hpp"
#include "core/cpu/gemm.hpp"
#include "model/ops/bf16_storage.hpp"

namespace asteria::ops {

namespace {

struct Operand {
  const float* values;
  const uint16_t* bf16;   // its bf16 copy, or null
  size_t n;
};

// Up to three operands as E values, side by side in the calling thread's workspace of E (grown
// once, then reused; each slot 64-byte aligned): in_place(o) is an operand's own data when it can
// be read as it is (it then takes no slot), else null, and fill(slot, o) writes it into its slot.
template <class E, class InPlace, class Fill>
std::array<const E*, 3> staged(std::initializer_list<Operand> operands, InPlace in_place, Fill fill) {
  constexpr size_t align = 64 / sizeof(E);
  auto slot_size = [&](const Operand& o) { return in_place(o) ? 0 : (o.n + align - 1) / align * align; };
  thread_local Buffer<E> workspace;
  size_t total = 0;
  for (const Operand& o : operands) total += slot_size(o);
  if (workspace.size() < total) workspace.resize(total);
  std::array<const E*, 3> out{};
  E* w = workspace.data();
  int i = 0;
  for (const Operand& o : operands) {
    if (const E* own = in_place(o)) {
      out[i++] = own;
      continue;
    }
    fill(w, o);
    out[i++] = w;
    w += slot_size(o);
  }
  return out;
}

// The operands rounded to bf16 as fp32 values (for the fp32 GEMM): rounded from their values,
// or widened from their bf16 copy.
std::array<const float*, 3> rounded_copies(std::initializer_list<Operand> operands) {
  return staged<float>(
      operands, [](const Operand&) -> const float* { return nullptr; },
      [](float* w, const Operand& o) { o.bf16 ? unpack_bf16(w, o.bf16, o.n) : round_to_bf16(w, o.values, o.n); });
}

// The operands' bf16 bits (for the bf16 GEMM): packed from their values, or their bf16 copy read
// in place.
std::array<const uint16_t*, 3> packed_operands(std::initializer_list<Operand> operands) {
  return staged<uint16_t>(
      operands, [](const Operand& o) { return o.bf16; }, [](uint16_t* w, const Operand& o) { pack_bf16(w, o.values, o.n); });
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
    const auto h = rounded_copies({{inp, nullptr, size_t(N) * IC}, {weight, weight_bf16, size_t(OC) * IC}});
    linear_forward(out, h[0], h[1], N, IC, OC, accumulate);
    return;
  }
  const auto h = packed_operands({{inp, nullptr, size_t(N) * IC}, {weight, weight_bf16, size_t(OC) * IC}});
  cpu::gemm_bf16(false, true, N, OC, IC, 1.f, h[0], IC, h[1], IC, accumulate ? 1.f : 0.f, out, OC);
}

void linear_backward_bf16(float* dinp, float* dweight, const float* dout, const float* inp, const float* weight,
                          const uint16_t* weight_bf16, int N, int IC, int OC, float scale, bool accumulate_dinp) {
  const size_t weight_n = dinp ? size_t(OC) * IC : 0;
  if (!cpu::bf16_gemm_available()) {
    const auto h = rounded_copies(
        {{dout, nullptr, size_t(N) * OC}, {inp, nullptr, size_t(N) * IC}, {weight, weight_bf16, weight_n}});
    linear_backward(dinp, dweight, h[0], h[1], h[2], N, IC, OC, scale, accumulate_dinp);
    return;
  }
  const auto h = packed_operands(
      {{dout, nullptr, size_t(N) * OC}, {inp, nullptr, size_t(N) * IC}, {weight, weight_bf16, weight_n}});
  if (dinp)
    cpu::gemm_bf16(false, false, N, IC, OC, 1.f, h[0], OC, h[2], IC, accumulate_dinp ? 1.f : 0.f, dinp, IC);
  cpu::gemm_bf16(true, false, OC, IC, N, scale, h[0], OC, h[1], IC, 1.f, dweight, IC);
}

template void linear_forward<float>(float*, const float*, const float*, int, int, int, bool);
template void linear_forward<double>(double*, const double*, const double*, int, int, int, bool);
template void linear_backward<float>(float*, float*, const float*, const float*, const float*,
                                     int, int, int, float, bool);
template void linear_backward<double>(double*, double*, const double*, const double*,
                                      const double*, int, int, int, double, bool);

}  // namespace asteria::ops
