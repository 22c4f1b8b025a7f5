#include "model/ops/linear.hpp"

#include "core/cpu/gemm.hpp"

namespace asteria::ops {

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

template void linear_forward<float>(float*, const float*, const float*, int, int, int, bool);
template void linear_forward<double>(double*, const double*, const double*, int, int, int, bool);
template void linear_backward<float>(float*, float*, const float*, const float*, const float*,
                                     int, int, int, float, bool);
template void linear_backward<double>(double*, double*, const double*, const double*,
                                      const double*, int, int, int, double, bool);

}  // namespace asteria::ops
