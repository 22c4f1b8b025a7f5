// Generation on the GPU (Decoder<float, CudaOps>) against the CPU's (Decoder<float>): the same
// parameters and prompt, then the logits of every position token by token over the cache within
// fp32 rounding of each other, and the same greedy continuation; for every architecture variant
// (pre / post norm, QK-norm, tied / untied, a padded vocabulary). Skipped without a device.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "core/backend.hpp"
#include "model/decoder.hpp"
#include "model/ops/op_set.hpp"
#include "model_test_util.hpp"

namespace asteria {
namespace {

class DecoderOnCuda : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!cuda_backend_available(&why)) GTEST_SKIP() << "no GPU: " << why;
  }
};

TEST_F(DecoderOnCuda, FollowsTheCpuDecoderTokenByToken) {
  struct Variant {
    NormKind norm;
    NormPlacement placement;
    bool qk_norm, tied;
  };
  for (const Variant v : {Variant{NormKind::LayerNorm, NormPlacement::Pre, false, true},
                          Variant{NormKind::RMSNorm, NormPlacement::Post, true, false},
                          Variant{NormKind::RMSNorm, NormPlacement::Post, true, true}}) {
    ModelConfig cfg = testing::tiny_config();
    cfg.d_model = 64;   // head size 32
    cfg.norm = v.norm;
    cfg.norm_placement = v.placement;
    cfg.qk_norm = v.qk_norm;
    cfg.tied_embeddings = v.tied;
    cfg.seq_len = 40;
    cfg.init_std = 0.4;
    Model<float> model(cfg, 1);
    model.init(21);
    testing::perturb_norm_weights(model, 22);
    Decoder<float> cpu(cfg, cfg.seq_len, /*max_rows=*/8);
    Decoder<float, CudaOps> gpu(cfg, cfg.seq_len, /*max_rows=*/8);
    cpu.load(testing::ModelParams(model));
    gpu.load(testing::ModelParams(model));
    std::vector<int32_t> a = {3, 14, 15, 9, 2, 6, 5, 3, 5, 8, 9, 7}, b = a;   // a prompt of 12: two passes
    const std::vector<float>* la = &cpu.forward(a.data(), static_cast<int>(a.size()));
    const std::vector<float>* lb = &gpu.forward(b.data(), static_cast<int>(b.size()));
    while (static_cast<int>(a.size()) < cfg.seq_len) {
      double diff = 0, scale = 0;
      for (size_t i = 0; i < la->size(); i++) {
        diff = std::max(diff, std::abs(double((*la)[i]) - (*lb)[i]));
        scale = std::max(scale, std::abs(double((*la)[i])));
      }
      ASSERT_LT(diff, 1e-5 * scale) << "position " << a.size();
      a.push_back(static_cast<int32_t>(std::max_element(la->begin(), la->begin() + cfg.vocab_size) - la->begin()));
      b.push_back(static_cast<int32_t>(std::max_element(lb->begin(), lb->begin() + cfg.vocab_size) - lb->begin()));
      if (static_cast<int>(a.size()) == cfg.seq_len) break;
      la = &cpu.forward(&a.back(), 1);
      lb = &gpu.forward(&b.back(), 1);
    }
    EXPECT_EQ(a, b);
  }
}

}  // namespace
}  // namespace asteria
