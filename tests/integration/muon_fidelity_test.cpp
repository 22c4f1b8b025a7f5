// Muon against its authors' code: asteria-optim-replay's Muon (fp32, as it trains) and
// muon_reference.py (KellerJordan/Muon's muon.py transcribed in PyTorch, run in float32 and in
// float64) take the same 20 steps of gradients of the same model (an OLMo-2-shaped tiny model's,
// at its initial parameters over 20 batches: q, k, v, up and gate as separate matrices, as
// transformers' classes hold them; the embedding, the LM head and the norm weights for the
// auxiliary AdamW) with the same hyperparameters. Asteria's deviation from the exact (float64)
// computation is measured against the reference's own float32 deviation from it, relative to how
// far the parameters moved: within 1.25x of it (the same rounding, in another order).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>

#include "core/hdf5_file.hpp"
#include "model/model.hpp"
#include "test_util.hpp"

using namespace asteria;
using asteria::testing::run_command;
using asteria::testing::TempDir;

namespace {

constexpr int kSteps = 20;

struct Tensor {
  std::string name;
  std::vector<int64_t> shape;
  bool muon = false;
  int layer = 0;
  size_t offset = 0, numel = 0;   // in the layer's flat buffer
};

std::string step_name(int s) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%06d", s);
  return buf;
}

}  // namespace

TEST(MuonFidelity, FollowsTheAuthorsCodeAsCloselyAsItsOwnFloat32Does) {
  TempDir dir("muon-fidelity");
  ModelConfig cfg;
  cfg.d_model = 64;
  cfg.n_layers = 2;
  cfg.n_heads = 4;
  cfg.mlp_hidden = 96;
  cfg.vocab_size = 120;
  cfg.embedding_size = 128;
  cfg.seq_len = 32;
  cfg.norm = NormKind::RMSNorm;
  cfg.norm_placement = NormPlacement::Post;
  cfg.qk_norm = true;
  cfg.tied_embeddings = false;
  const int batch = 2;
  Model<float> m(cfg, batch);
  m.init(3);

  // The tensors as transformers' classes hold them: fused ones cut into their parts.
  std::vector<Tensor> tensors;
  for (int l = 0; l < m.num_layers(); ++l)
    for (const ParamEntry& e : m.table(l).entries) {
      const bool matrix = e.cls == ParamClass::Matrix;
      const int parts = matrix ? e.parts : 1;
      const int64_t rows = e.shape[0] / parts;
      for (int k = 0; k < parts; ++k) {
        std::vector<int64_t> shape = e.shape;
        shape[0] = rows;
        const size_t n = e.numel / parts;
        tensors.push_back({e.name + (parts > 1 ? "." + std::to_string(k) : ""), shape, matrix, l, e.offset + k * n, n});
      }
    }
  std::vector<float> init, grads;
  for (const Tensor& t : tensors) init.insert(init.end(), m.params(t.layer) + t.offset, m.params(t.layer) + t.offset + t.numel);
  auto h5 = std::make_unique<Hdf5File>(dir.file("in.h5"), Hdf5File::Mode::Create);
  for (const Tensor& t : tensors) h5->write("/init/" + t.name, t.shape, m.params(t.layer) + t.offset);
  std::mt19937 rng(7);
  std::vector<int32_t> inputs(static_cast<size_t>(batch) * cfg.seq_len), targets(inputs.size());
  for (int s = 1; s <= kSteps; ++s) {
    for (size_t i = 0; i < inputs.size(); ++i) {
      inputs[i] = static_cast<int32_t>(rng() % cfg.vocab_size);
      targets[i] = static_cast<int32_t>(rng() % cfg.vocab_size);
    }
    m.set_batch(inputs.data(), targets.data());
    m.zero_grads();
    for (int l = 0; l < m.num_layers(); ++l) m.forward(l);
    for (int l = m.num_layers() - 1; l >= 0; --l) m.backward(l, 1.0);
    for (const Tensor& t : tensors) {
      h5->write("/grads/" + step_name(s) + "/" + t.name, t.shape, m.grads(t.layer) + t.offset);
      grads.insert(grads.end(), m.grads(t.layer) + t.offset, m.grads(t.layer) + t.offset + t.numel);
    }
  }
  h5.reset();   // closed: the replay opens it

  // The same hyperparameters on both sides (weight decay on, to check its form too).
  std::ofstream(dir.file("muon.yaml")) << "optim:\n  name: muon\n  lr: 0.02\n  betas: [0.95, 0.95]\n  weight_decay: 0.01\n"
                                          "  ns_steps: 5\n  nesterov: true\n  compensated_updates: false\n"
                                          "  adamw_1d:\n    lr: 3.0e-4\n    betas: [0.9, 0.95]\n    eps: 1.0e-10\n"
                                          "    weight_decay: 0.01\n";
  nlohmann::json man = {{"steps", kSteps}, {"lr", 0.02}, {"momentum", 0.95}, {"nesterov", true}, {"ns_steps", 5},
                        {"weight_decay", 0.01},
                        {"adam", {{"lr", 3e-4}, {"betas", {0.9, 0.95}}, {"eps", 1e-10}, {"weight_decay", 0.01}}},
                        {"tensors", nlohmann::json::array()}};
  for (const Tensor& t : tensors) man["tensors"].push_back({{"name", t.name}, {"shape", t.shape}, {"muon", t.muon}});
  std::ofstream(dir.file("manifest.json")) << man.dump();
  std::ofstream(dir.file("init.f32"), std::ios::binary).write(reinterpret_cast<const char*>(init.data()), init.size() * 4);
  std::ofstream(dir.file("grads.f32"), std::ios::binary).write(reinterpret_cast<const char*>(grads.data()), grads.size() * 4);

  std::string log;
  ASSERT_EQ(run_command(std::string(ASTERIA_BIN_DIR) + "/asteria-optim-replay --config " + dir.file("muon.yaml") +
                            " --input " + dir.file("in.h5") + " --output " + dir.file("out.h5"), &log), 0) << log;
  ASSERT_EQ(run_command("/usr/bin/python3 " + std::string(ASTERIA_SOURCE_DIR) + "/tests/integration/muon_reference.py " +
                            dir.path().string(), &log), 0) << log;
  auto read_f64 = [&](const std::string& name) {
    std::ifstream in(dir.file(name), std::ios::binary);
    std::vector<double> v(init.size());
    in.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(v.size() * 8));
    return v;
  };
  const std::vector<double> ref32 = read_f64("ref.f32.f64"), ref64 = read_f64("ref.f64.f64");
  const Hdf5File out(dir.file("out.h5"), Hdf5File::Mode::Read);

  // Per group (Muon's matrices, the auxiliary AdamW's tensors): the largest deviation from the
  // float64 run over the largest displacement of the float64 run.
  for (bool muon : {true, false}) {
    double moved = 0, dev_ref = 0, dev_ast = 0;
    size_t at = 0;
    for (const Tensor& t : tensors) {
      std::vector<double> ast(t.numel);
      out.read("/params/" + step_name(kSteps) + "/" + t.name, ast.data(), t.numel);
      if (t.muon == muon)
        for (size_t i = 0; i < t.numel; ++i) {
          moved = std::max(moved, std::abs(ref64[at + i] - init[at + i]));
          dev_ref = std::max(dev_ref, std::abs(ref32[at + i] - ref64[at + i]));
          dev_ast = std::max(dev_ast, std::abs(ast[i] - ref64[at + i]));
        }
      at += t.numel;
    }
    std::printf("muon fidelity (%s): moved %.3g; deviation from float64: the reference's float32 %.3g (%.3g relative), "
                "Asteria %.3g (%.3g relative, %.3gx the reference's)\n",
                muon ? "Muon's matrices" : "auxiliary AdamW", moved, dev_ref, dev_ref / moved, dev_ast, dev_ast / moved,
                dev_ast / dev_ref);
    ASSERT_GT(moved, 0);
    EXPECT_LE(dev_ast, 1.25 * dev_ref) << (muon ? "muon" : "adamw");
  }
}

// distributed.fsdp full with Muon: the layers are sharded in whole tensors (every matrix on one
// rank: Newton-Schulz needs no gather), and two ranks train as one does on the same global batch
// (the gradient sums round in another order).
TEST(MuonRanks, ShardedInWholeMatricesTrainsAsOneRank) {
  TempDir dir("muon-ranks");
  asteria::testing::write_bigram_tokens(dir.file("train.bin"), 40000, 512, 3);
  const std::string args = " --config " + asteria::testing::kConfigs + "/tiny-adamw.yaml --set optim.name=muon"
                           " --set optim.lr=0.02 --set data.train=" + dir.file("train.bin") +
                           " --set data.eval= --set train.steps=8 --set checkpoint.enabled=false";
  std::string log;
  ASSERT_EQ(run_command(asteria::testing::kTrain + args + " --set train.micro_batch=8 --set run.dir=" + dir.file("one"), &log), 0)
      << log;
  ASSERT_EQ(run_command(asteria::testing::kMpirun + "-np 2 " + asteria::testing::kTrain + args +
                            " --set train.micro_batch=4 --set distributed.fsdp=full --set run.dir=" + dir.file("two"), &log), 0)
      << log;
  ASSERT_EQ(run_command(asteria::testing::kTrain + args + " --set distributed.world_size=2 --dry-run", &log), 0) << log;
  EXPECT_NE(log.find("unit: a whole tensor (muon steps each matrix whole)"), std::string::npos) << log;
  const std::vector<double> one = asteria::testing::losses(dir.file("one")), two = asteria::testing::losses(dir.file("two"));
  ASSERT_EQ(one.size(), 8u);
  EXPECT_LT(asteria::testing::worst_relative(one, two), 1e-4);
  std::printf("muon, 1 vs 2 ranks (fsdp full): %.3g relative\n", asteria::testing::worst_relative(one, two));
}
