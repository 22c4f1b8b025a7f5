// Decoupled weight decay with a gradient of zero: only the decay moves the weights, so after
// k updates every weight must be w0 (1 - lr wd)^k, to within the fp32 rounding of that result,
// also where lr * wd is far below fp32's resolution (1e-9; the tail of a cosine schedule), for
// every optimizer. Without compensation such a decay rounds away at every step.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <random>
#include <stdexcept>

#include "optim/adamw.hpp"
#include "optim/muon.hpp"
#include "optim/second_order.hpp"

using namespace asteria;

namespace {

// The optimizer a test case names as optim.name spells it.
OptimizerKind optimizer_named(const std::string& name) {
  for (OptimizerKind k : {OptimizerKind::AdamW, OptimizerKind::Shampoo, OptimizerKind::Soap, OptimizerKind::KlShampoo})
    if (name == to_string(k)) return k;
  throw std::invalid_argument("no optimizer named " + name);
}

std::unique_ptr<Optimizer> make(const std::string& algo, double wd, const std::vector<ParamTable>& layers,
                                bool compensated) {
  if (algo == "muon") {   // a zero gradient orthogonalizes to zero: the decay alone
    MuonParams p;
    p.weight_decay = wd;
    p.compensated = compensated;
    return std::make_unique<Muon>(p, layers);
  }
  if (algo == "adamw") {
    AdamWParams p;
    p.weight_decay = wd;
    p.compensated = compensated;
    return std::make_unique<AdamW>(p, layers);
  }
  SecondOrderParams p;
  p.algorithm = optimizer_named(algo);
  p.weight_decay = wd;
  p.precond.precondition_frequency = 10;
  p.precond.shampoo_beta = 0.95;
  p.compensated = compensated;
  return std::make_unique<SecondOrderOptimizer>(p, layers);
}

// The largest distance of a weight from w0 (1 - lr wd)^updates, in ulps of that value.
double decay_error_ulps(const std::string& algo, double lr_wd, bool compensated, int steps = 100) {
  ParamTable t;
  t.add("w", {8, 6}, ParamClass::Matrix);
  const double lr = 1e-3;
  auto opt = make(algo, lr_wd / lr, {t}, compensated);
  std::vector<float> w(t.numel), g(t.numel, 0.0f);
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> mag(-6, 6);   // weights over several binades
  for (size_t i = 0; i < w.size(); ++i) w[i] = (i % 2 ? -1.0f : 1.0f) * std::exp2(mag(rng));
  const std::vector<float> w0 = w;
  for (int s = 1; s <= steps; ++s) opt->step_layer(0, w.data(), g.data(), 1.0f, lr, s);
  // SOAP's and KL-Shampoo's first call only initializes (no update, no decay).
  const int updates = algo == "soap" || algo == "kl_shampoo" ? steps - 1 : steps;
  const double factor = std::pow(1.0 - lr_wd, updates);
  double worst = 0;
  for (size_t i = 0; i < w.size(); ++i) {
    const double exact = w0[i] * factor;
    const float near = static_cast<float>(exact);
    const double ulp = std::nextafter(std::abs(near), INFINITY) - std::abs(near);
    worst = std::max(worst, std::abs(w[i] - exact) / ulp);
  }
  return worst;
}

class WeightDecay : public ::testing::TestWithParam<const char*> {};

}  // namespace

TEST_P(WeightDecay, ShrinksByTheExactFactorAtTinyLrTimesWd) {
  for (double lr_wd : {1e-6, 1e-9})
    EXPECT_LE(decay_error_ulps(GetParam(), lr_wd, true), 0.5 + 1e-3) << "lr * wd = " << lr_wd;
}

TEST_P(WeightDecay, WithoutCompensationTheTinyDecayIsLost) {
  // What compensation is for: at lr * wd = 1e-9 fp32 weights cannot take the decrement, and the
  // weights stay where they started (1e-7 relative, 1-2 ulps, short of the exact result).
  EXPECT_GT(decay_error_ulps(GetParam(), 1e-9, false), 0.75);
}

INSTANTIATE_TEST_SUITE_P(Optimizers, WeightDecay, ::testing::Values("adamw", "shampoo", "soap", "kl_shampoo", "muon"),
                         [](const auto& info) { return std::string(info.param); });
