// AdamW against a step computed by hand.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "optim/adamw.hpp"

using namespace asteria;

TEST(AdamW, FirstTwoStepsMatchHandComputation) {
  ParamTable t;
  t.add("w", {2}, ParamClass::Matrix);
  t.add("norm", {1}, ParamClass::Norm);
  AdamWParams p;
  p.beta1 = 0.9;
  p.beta2 = 0.99;
  p.eps = 1e-8;
  p.weight_decay = 0.1;
  p.decay_norms = false;
  AdamW opt(p, {t});
  float w[3] = {1.0f, -2.0f, 0.5f};
  float g[3] = {0.5f, 0.25f, -1.0f};
  const double lr = 0.01;
  opt.step_layer(0, w, g, 1.0f, lr, 1);
  // Step 1: m_hat = g, v_hat = g^2, so the Adam part is sign(g) (up to eps);
  // decay only for the matrix: w -= lr * (sign(g) + wd * w).
  EXPECT_NEAR(w[0], 1.0 - lr * (1.0 + 0.1 * 1.0), 1e-6);
  EXPECT_NEAR(w[1], -2.0 - lr * (1.0 + 0.1 * -2.0), 1e-6);
  EXPECT_NEAR(w[2], 0.5 - lr * (-1.0), 1e-6);

  // Step 2 with grad_scale 0.5 (a clip): hand-computed moments for element 0.
  double w0 = w[0];
  float g2[3] = {1.0f, 0.0f, 0.0f};
  opt.step_layer(0, w, g2, 0.5f, lr, 2);
  double gs = 0.5;
  double m = 0.9 * (0.1 * 0.5) + 0.1 * gs;
  double v = 0.99 * (0.01 * 0.25) + 0.01 * gs * gs;
  double mh = m / (1 - 0.9 * 0.9), vh = v / (1 - 0.99 * 0.99);
  EXPECT_NEAR(w[0], w0 - lr * (mh / (std::sqrt(vh) + 1e-8) + 0.1 * w0), 1e-6);
  EXPECT_EQ(opt.state_bytes(), 3 * 3 * sizeof(float));   // m, v and the update compensation
}

TEST(AdamW, EmbeddingDecayIsConfigurable) {
  ParamTable t;
  t.add("wte", {1}, ParamClass::Embedding);
  for (bool decay : {true, false}) {
    AdamWParams p;
    p.weight_decay = 0.5;
    p.decay_embeddings = decay;
    AdamW opt(p, {t});
    float w = 2.0f, g = 0.0f;  // zero gradient: only decay moves the weight
    opt.step_layer(0, &w, &g, 1.0f, 0.1, 1);
    EXPECT_FLOAT_EQ(w, decay ? 2.0f - 0.1f * 0.5f * 2.0f : 2.0f);
  }
}

// The CUDA backend steps AdamW's state where the tier manager bound it (device memory,
// train/device_training.cpp) through step_layer_with. Bound to other host memory and stepped
// with the CPU's adamw_update that must be step_layer bit for bit, with and without the
// compensation, which checks the state's roles and the ranges (the device kernel itself is
// checked bit for bit against the CPU's in test_cuda).
TEST(AdamW, SteppingCopiesOfTheStateEqualsSteppingTheState) {
  ParamTable t;
  t.add("w", {3, 4}, ParamClass::Matrix);
  t.add("norm", {4}, ParamClass::Norm);
  t.add("emb", {2, 4}, ParamClass::Embedding);
  for (bool compensated : {true, false}) {
    AdamWParams p;
    p.weight_decay = 0.1;
    p.compensated = compensated;
    AdamW a(p, {t}), b(p, {t});
    std::vector<float> wa(t.numel), wb, g(t.numel);
    for (size_t i = 0; i < t.numel; ++i) {
      wa[i] = 0.1f * static_cast<float>(i) - 1.0f;
      g[i] = std::sin(static_cast<float>(i));
    }
    wb = wa;
    // b's state copied out and bound there, stepped there, the copies compared with a's state
    // after a's steps.
    std::vector<StateTensor*> states = b.layer_states(0);
    ASSERT_EQ(states.size(), compensated ? 3u : 2u);
    std::vector<std::vector<float>> copies;
    for (StateTensor* s : states) copies.emplace_back(s->data(), s->data() + s->size());
    for (size_t i = 0; i < states.size(); ++i) states[i]->bind(copies[i].data());
    for (int64_t step = 1; step <= 3; ++step) {
      a.step_layer(0, wa.data(), g.data(), 0.5f, 1e-2, step);
      b.step_layer_with(0, wb.data(), g.data(), 0.5f, 1e-2, step, [](auto... args) { adamw_update(args...); });
    }
    EXPECT_EQ(std::memcmp(wa.data(), wb.data(), wa.size() * sizeof(float)), 0) << "compensated " << compensated;
    std::vector<StateTensor*> want = a.layer_states(0);
    for (size_t i = 0; i < want.size(); ++i)
      EXPECT_EQ(std::memcmp(want[i]->data(), copies[i].data(), copies[i].size() * sizeof(float)), 0)
          << "state " << i << ", compensated " << compensated;
  }
}
