#pragma once
// The shadow pipeline tests' optimizer: SOAP on one 6 x 5 matrix cut into blocks of 3 x 3 and
// 3 x 2, a refresh every 4 steps.
#include "optim/second_order.hpp"

namespace asteria::testing {

inline ParamTable small_table() {
  ParamTable t;
  t.add("w", {6, 5}, ParamClass::Matrix);
  return t;
}

inline SecondOrderParams small_soap() {
  SecondOrderParams p;
  p.algorithm = OptimizerKind::Soap;
  p.precond.precondition_frequency = 4;
  p.max_preconditioner_dim = 3;   // blocks of 3 x 3, 3 x 2
  return p;
}

}  // namespace asteria::testing
