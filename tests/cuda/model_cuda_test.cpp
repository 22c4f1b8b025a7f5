// The whole model on the CUDA backend (Model<float, CudaOps>) against the CPU one
// (Model<float>): the same parameters and tokens, then the loss and every layer's gradient, for
// every architecture variant of the gradient tests and the memory-lean settings (tiled
// attention, chunked head, activation recompute). Both sides are fp32 with fp32
// accumulation (no TF32), so they differ by rounding order only: the loss within 1e-5
// relative, each layer's gradient within 1e-4 of its norm (about 60 kernels deep, each within
// the ops test's 1e-5); and with runtime.precision bf16 on both sides, like with like.
// Skipped without a device.
#include <gtest/gtest.h>

#include <cmath>
#include <ostream>
#include <string>
#include <tuple>
#include <vector>

#include "core/backend.hpp"
#include "model/model.hpp"
#include "model/ops/op_set.hpp"
#include "model_test_util.hpp"

namespace asteria {
namespace {

struct Variant {
  std::string name;
  NormKind norm;
  NormPlacement placement;
  bool tied, qk_norm, z_loss;
  AttentionKind attention;
  int head_chunk;
  ActivationRecompute::Mode recompute;
};

void PrintTo(const Variant& v, std::ostream* os) { *os << v.name; }   // in test names, not bytes

ModelConfig config_of(const Variant& v) {
  ModelConfig c = testing::tiny_config();
  c.d_model = 32;   // head size 16: the smallest the CUDA tiled attention is built for
  c.norm = v.norm;
  c.norm_placement = v.placement;
  c.tied_embeddings = v.tied;
  c.qk_norm = v.qk_norm;
  c.z_loss = v.z_loss ? 0.1 : 0.0;
  c.attention = v.attention;
  c.head_chunk = v.head_chunk;
  return c;
}

double norm_of(const std::vector<float>& v) {
  double s = 0;
  for (float x : v) s += double(x) * x;
  return std::sqrt(s);
}

class ModelOnCuda : public ::testing::TestWithParam<Variant> {
 protected:
  void SetUp() override {
    std::string why;
    if (!cuda_backend_available(&why)) GTEST_SKIP() << "no GPU: " << why;
  }
};

// The CUDA model against the CPU model at the same precision, on the same parameters and tokens: the loss
// within loss_tol relative, each layer's gradient within grad_tol of its norm.
void expect_matches_cpu(const Variant& v, ComputePrecision precision, double loss_tol, double grad_tol) {
  const ModelConfig cfg = config_of(v);
  ActivationRecompute recompute;
  recompute.mode = v.recompute;
  const int batch = 2;
  Model<float> cpu(cfg, batch, Model<float>::Storage::Owned, recompute, precision);
  Model<float, CudaOps> gpu(cfg, batch, Model<float, CudaOps>::Storage::Owned, recompute, precision);
  cpu.init(31);
  testing::perturb_norm_weights(cpu, 4);
  for (int l = 0; l < cpu.num_layers(); l++) CudaOps::to_device(gpu.params(l), cpu.params(l), cpu.table(l).numel);
  const auto tokens = testing::random_batch(cfg, batch, 19);
  double loss[2];
  for (int side = 0; side < 2; side++) {
    auto run = [&](auto& m) {
      m.set_batch(tokens.inputs.data(), tokens.targets.data());
      m.zero_grads();
      loss[side] = testing::forward_all(m);
      testing::backward_all(m, 0.5);
    };
    side == 0 ? run(cpu) : run(gpu);
  }
  EXPECT_NEAR(loss[1], loss[0], loss_tol * std::fabs(loss[0]));
  EXPECT_NEAR(gpu.last_ce_loss(), cpu.last_ce_loss(), loss_tol * std::fabs(cpu.last_ce_loss()));
  for (int l = 0; l < cpu.num_layers(); l++) {
    const size_t n = cpu.table(l).numel;
    std::vector<float> want(cpu.grads(l), cpu.grads(l) + n), got(n);
    CudaOps::to_host(got.data(), gpu.grads(l), n);
    std::vector<float> diff(n);
    for (size_t i = 0; i < n; i++) diff[i] = got[i] - want[i];
    EXPECT_LE(norm_of(diff), grad_tol * norm_of(want)) << cpu.layer_name(l);
  }
}

TEST_P(ModelOnCuda, LossAndGradientsMatchTheCpuModel) { expect_matches_cpu(GetParam(), ComputePrecision::Fp32, 1e-5, 1e-4); }

// runtime.precision bf16 on both backends: the GEMMs' operands and the kept activations rounded
// to bf16 at the same places (model.hpp), fp32 accumulation. The sides differ by the order of
// fp32 sums, as in fp32, and by the rare value that those differences carry across a bf16
// rounding boundary (then off by 2^-8 relative): ten times the fp32 bounds. (bf16 against fp32
// is the CPU's test, model_bf16_test.cpp.)
TEST_P(ModelOnCuda, Bf16MatchesTheCpuModelAtBf16) { expect_matches_cpu(GetParam(), ComputePrecision::Bf16, 1e-4, 1e-3); }

// A second micro-batch adds to the gradients on the device as on the host (accumulation).
TEST_P(ModelOnCuda, GradientsAccumulateOverMicroBatches) {
  const Variant& v = GetParam();
  if (v.name != "PreRMS_tied") GTEST_SKIP() << "one variant is enough";
  const ModelConfig cfg = config_of(v);
  Model<float> cpu(cfg, 1);
  Model<float, CudaOps> gpu(cfg, 1);
  cpu.init(5);
  gpu.init(5);   // init is a pure function of the seed on both backends
  for (int l = 0; l < cpu.num_layers(); l++) {
    std::vector<float> p(cpu.table(l).numel);
    CudaOps::to_host(p.data(), gpu.params(l), p.size());
    for (size_t i = 0; i < p.size(); i++) ASSERT_EQ(p[i], cpu.params(l)[i]) << cpu.layer_name(l);
  }
  cpu.zero_grads();
  gpu.zero_grads();
  for (uint64_t mb = 0; mb < 2; mb++) {
    const auto tokens = testing::random_batch(cfg, 1, 40 + mb);
    for (int side = 0; side < 2; side++) {
      auto run = [&](auto& m) {
        m.set_batch(tokens.inputs.data(), tokens.targets.data());
        testing::forward_all(m);
        testing::backward_all(m, 0.5);
      };
      side == 0 ? run(cpu) : run(gpu);
    }
  }
  for (int l = 0; l < cpu.num_layers(); l++) {
    const size_t n = cpu.table(l).numel;
    std::vector<float> want(cpu.grads(l), cpu.grads(l) + n), got(n), diff(n);
    CudaOps::to_host(got.data(), gpu.grads(l), n);
    for (size_t i = 0; i < n; i++) diff[i] = got[i] - want[i];
    EXPECT_LE(norm_of(diff), 1e-4 * norm_of(want)) << cpu.layer_name(l);
  }
}

using Mode = ActivationRecompute::Mode;
const Variant kVariants[] = {
    {"PreLN", NormKind::LayerNorm, NormPlacement::Pre, false, false, false, AttentionKind::Full, 0, Mode::None},
    {"PreRMS_tied", NormKind::RMSNorm, NormPlacement::Pre, true, false, false, AttentionKind::Full, 0, Mode::None},
    {"PreRMS_qknorm_zloss", NormKind::RMSNorm, NormPlacement::Pre, false, true, true, AttentionKind::Full, 0, Mode::None},
    {"PostRMS_tied_qknorm_zloss", NormKind::RMSNorm, NormPlacement::Post, true, true, true, AttentionKind::Full, 0, Mode::None},
    {"PostRMS_tiled", NormKind::RMSNorm, NormPlacement::Post, false, true, false, AttentionKind::Tiled, 0, Mode::None},
    {"PreRMS_tiled_chunked_head", NormKind::RMSNorm, NormPlacement::Pre, true, false, true, AttentionKind::Tiled, 5, Mode::None},
    {"PostRMS_checkpointed", NormKind::RMSNorm, NormPlacement::Post, false, true, true, AttentionKind::Tiled, 4, Mode::Blocks},
};

INSTANTIATE_TEST_SUITE_P(Variants, ModelOnCuda, ::testing::ValuesIn(kVariants),
                         [](const ::testing::TestParamInfo<Variant>& i) { return i.param.name; });

}  // namespace
}  // namespace asteria
