// asteria-optim-replay: HDF5 in/out, equality with the in-process optimizer, agreement with the
// fp64 reference, and error paths.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "../optim/reference_optimizers.hpp"
#include "core/hdf5_file.hpp"
#include "test_util.hpp"
#include "config/config.hpp"
#include "optim/optimizer_factory.hpp"

using namespace asteria;
using asteria::testing::run_command;
using asteria::testing::TempDir;
namespace ref = asteria::reference;

namespace {

const std::string kReplay = std::string(ASTERIA_BIN_DIR) + "/asteria-optim-replay";
constexpr int kSteps = 5, kRows = 5, kCols = 4, kVec = 3;

struct Recorded {
  std::vector<float> w0, v0;
  std::vector<std::vector<float>> gw, gv;
};

Recorded write_input(const std::string& path, bool skip_step_2 = false, bool bad_shape = false) {
  Recorded r;
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  r.w0.resize(kRows * kCols);
  r.v0.resize(kVec);
  for (auto& x : r.w0) x = nd(rng);
  for (auto& x : r.v0) x = 1.0f + 0.1f * nd(rng);
  Hdf5File f(path, Hdf5File::Mode::Create);
  f.write("/init/blocks.0.w", {kRows, kCols}, r.w0.data());
  std::vector<double> v0d(r.v0.begin(), r.v0.end());
  f.write("/init/blocks.0.norm", {kVec}, v0d.data());  // float64 input works too
  for (int s = 1; s <= kSteps; ++s) {
    std::vector<float> gw(kRows * kCols), gv(kVec);
    for (auto& x : gw) x = nd(rng);
    for (auto& x : gv) x = nd(rng);
    r.gw.push_back(gw);
    r.gv.push_back(gv);
    if (skip_step_2 && s == 2) continue;
    char step[16];
    std::snprintf(step, sizeof step, "%06d", s);
    const bool swap = bad_shape && s == 3;
    f.write(std::string("/grads/") + step + "/blocks.0.w", {swap ? kCols : kRows, swap ? kRows : kCols}, gw.data());
    f.write(std::string("/grads/") + step + "/blocks.0.norm", {kVec}, gv.data());
  }
  return r;
}

const char* kSoapConfig = R"(optim:
  name: soap
  lr: 0.05
  betas: [0.9, 0.95]
  weight_decay: 0.01
  precondition_frequency: 2
)";

}  // namespace

TEST(OptimReplay, MatchesInProcessOptimizerAndReference) {
  TempDir dir("replay");
  Recorded r = write_input(dir.file("in.h5"));
  { std::ofstream(dir.file("soap.yaml")) << kSoapConfig; }
  std::string out;
  ASSERT_EQ(0, run_command(kReplay + " --config " + dir.file("soap.yaml") + " --input " + dir.file("in.h5") +
                               " --output " + dir.file("out.h5"), &out))
      << out;

  // In process: the same optimizer over the same tables (parameters in name order).
  Config cfg = load_config(dir.file("soap.yaml"));
  ParamTable tn, tw;
  tn.add("blocks.0.norm", {kVec}, ParamClass::Norm);
  tw.add("blocks.0.w", {kRows, kCols}, ParamClass::Matrix);
  auto opt = make_optimizer(cfg.optim, {tn, tw});
  std::vector<float> v = r.v0, w = r.w0;
  ref::Soap soap;
  soap.h = {0.9, 0.95, 0.95, 1e-8};
  soap.h.freq = 2;
  std::vector<double> w_ref(r.w0.begin(), r.w0.end());
  Hdf5File res(dir.file("out.h5"), Hdf5File::Mode::Read);
  for (int s = 1; s <= kSteps; ++s) {
    opt->step_layer(0, v.data(), r.gv[s - 1].data(), 1.0f, 0.05, s);
    opt->step_layer(1, w.data(), r.gw[s - 1].data(), 1.0f, 0.05, s);
    char step[16];
    std::snprintf(step, sizeof step, "%06d", s);
    Hdf5Array ow = res.read(std::string("/params/") + step + "/blocks.0.w");
    Hdf5Array ov = res.read(std::string("/params/") + step + "/blocks.0.norm");
    ASSERT_EQ(ow.shape, (std::vector<int64_t>{kRows, kCols}));
    for (int i = 0; i < kRows * kCols; ++i) EXPECT_EQ(ow.data[i], static_cast<double>(w[i])) << s;
    for (int i = 0; i < kVec; ++i) EXPECT_EQ(ov.data[i], static_cast<double>(v[i])) << s;
    // The fp64 reference of SOAP on the matrix.
    ref::Mat G(kRows, kCols);
    for (int i = 0; i < kRows * kCols; ++i) G.a[i] = r.gw[s - 1][i];
    ref::Mat D = soap.step(G);
    if (D.r)
      for (int i = 0; i < kRows * kCols; ++i) w_ref[i] = (w_ref[i] - 0.05 * D.a[i]) * (1 - 0.05 * 0.01);
    for (int i = 0; i < kRows * kCols; ++i) EXPECT_NEAR(ow.data[i], w_ref[i], 2e-5) << s;
  }
}

TEST(OptimReplay, ErrorsNameTheDatasetAndLeaveNoOutput) {
  TempDir dir("replay-bad");
  { std::ofstream(dir.file("soap.yaml")) << kSoapConfig; }
  write_input(dir.file("gap.h5"), /*skip_step_2=*/true);
  write_input(dir.file("shape.h5"), false, /*bad_shape=*/true);
  std::string out;
  EXPECT_EQ(1, run_command(kReplay + " -c " + dir.file("soap.yaml") + " -i " + dir.file("gap.h5") + " -o " +
                               dir.file("o1.h5"), &out));
  EXPECT_NE(out.find("step 000002 is missing"), std::string::npos) << out;
  EXPECT_EQ(1, run_command(kReplay + " -c " + dir.file("soap.yaml") + " -i " + dir.file("shape.h5") + " -o " +
                               dir.file("o2.h5"), &out));
  EXPECT_NE(out.find("'/grads/000003/blocks.0.w' has shape [4, 5] but the parameter is [5, 4]"), std::string::npos) << out;
  EXPECT_EQ(1, run_command(kReplay + " -c " + dir.file("soap.yaml") + " -i " + dir.file("none.h5") + " -o " +
                               dir.file("o3.h5"), &out));
  EXPECT_NE(out.find("none.h5"), std::string::npos) << out;
  for (const char* f : {"o1.h5", "o2.h5", "o3.h5", "o1.h5.tmp", "o2.h5.tmp"})
    EXPECT_FALSE(std::filesystem::exists(dir.file(f))) << f;
}
