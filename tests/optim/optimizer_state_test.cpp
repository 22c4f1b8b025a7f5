// Optimizers as Stateful components (src/optim/optimizer_state.cpp): the second-order
// optimizers' per-block counters round-trip under "optim.counters.<block>"; AdamW (all tensors)
// saves no field; a missing counter is named with the file.
#include <gtest/gtest.h>

#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "optim/adamw.hpp"
#include "optim/second_order.hpp"

namespace asteria {
namespace {

ParamTable table() {
  ParamTable t;
  t.add("w", {6, 5}, ParamClass::Matrix);
  t.add("norm", {5}, ParamClass::Norm);
  return t;
}

SecondOrderParams soap() {
  SecondOrderParams p;
  p.algorithm = OptimizerKind::Soap;
  p.precond.precondition_frequency = 2;
  p.max_preconditioner_dim = 3;   // several blocks
  return p;
}

// A few steps, one of them with a non-finite gradient in one block (a failure counter).
void run_steps(SecondOrderOptimizer& opt, int steps) {
  const ParamTable t = table();
  std::vector<float> w(t.numel, 0.1f), g(t.numel);
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (int s = 1; s <= steps; ++s) {
    for (float& x : g) x = nd(rng);
    if (s == steps) g[0] = std::numeric_limits<float>::quiet_NaN();
    opt.step_layer(0, w.data(), g.data(), 1.0f, 0.01, s);
  }
}

std::vector<std::vector<int64_t>> values(const std::vector<OptimizerCounters>& c) {
  std::vector<std::vector<int64_t>> v;
  for (const OptimizerCounters& x : c) v.push_back(x.values);
  return v;
}

TEST(OptimizerState, SecondOrderCountersRoundTrip) {
  SecondOrderOptimizer saved(soap(), {table()}), loaded(soap(), {table()});
  run_steps(saved, 5);
  StateFields fields;
  save_states({&saved}, fields);
  ASSERT_EQ(fields.size(), saved.counters().size());
  for (const OptimizerCounters& c : saved.counters()) {
    std::string key = "optim.counters." + c.name;
    for (char& ch : key)
      if (ch == '/') ch = ':';
    ASSERT_EQ(fields.count(key), 1u) << key;
    EXPECT_EQ(fields.at(key), std::vector<double>(c.values.begin(), c.values.end())) << key;
  }
  ASSERT_NE(values(loaded.counters()), values(saved.counters()));
  load_states({&loaded}, fields, "ck/rank00000.h5");
  EXPECT_EQ(values(loaded.counters()), values(saved.counters()));
}

TEST(OptimizerState, AdamWSavesNoField) {
  AdamW opt(AdamWParams{}, {table()});
  StateFields fields;
  save_states({&opt}, fields);
  EXPECT_TRUE(fields.empty());
  load_states({&opt}, fields, "ck/rank00000.h5");
}

TEST(OptimizerState, MissingCounterIsNamedWithTheFile) {
  SecondOrderOptimizer opt(soap(), {table()});
  StateFields fields;
  save_states({&opt}, fields);
  const std::string erased = fields.begin()->first;
  fields.erase(fields.begin());
  try {
    load_states({&opt}, fields, "ck/rank00000.h5");
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("ck/rank00000.h5: value '" + erased + "' is missing"), std::string::npos) << m;
  }
}

}  // namespace
}  // namespace asteria
