// Bad checkpoints and refused resumes: each is an Error naming the file (and the tensor, or the
// key with both values) and what is wrong, raised before the run changes anything in run.dir.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "core/error.hpp"
#include "train/checkpoint/checkpoint_manifest.hpp"
#include "trainer_runs.hpp"

using namespace asteria;
using asteria::testing::TempDir;
namespace fs = std::filesystem;

namespace {

// Every file under `dir` with its checksum: the state of run.dir a refused resume must keep.
std::map<std::string, std::string> snapshot(const std::string& dir) {
  std::map<std::string, std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    out[e.path().string()] = e.is_regular_file() ? file_xxh3(e.path().string()) : "dir";
  return out;
}

class BadCheckpoint : public ::testing::Test {
 protected:
  void SetUp() override {
    asteria::testing::write_bigram_tokens(dir_.file("train.bin"), 20000, 512, 3);
    asteria::testing::write_bigram_tokens(dir_.file("other.bin"), 20000, 512, 4);
    Trainer t(config({"train.stop_after=3"}));
    t.run();
    ckpt_ = dir_.file("run") + "/checkpoints/step00000003";
    ASSERT_TRUE(fs::exists(ckpt_ + "/manifest.json"));
  }
  Config config(std::vector<std::string> extra) const {
    std::vector<std::string> sets = asteria::testing::short_second_order_sets(dir_, "soap", 6);
    sets.erase(std::remove(sets.begin(), sets.end(), "run.overwrite=true"), sets.end());
    sets.insert(sets.end(), extra.begin(), extra.end());
    return load_config_text("seed: 9\nmodel:\n  preset: tiny\n  n_layers: 2\n", "bad.yaml", sets);
  }
  // Resuming with `extra` fails with every needle in the message, and run.dir is unchanged.
  void expect_refused(std::vector<std::string> extra, std::vector<std::string> needles) {
    const auto before = snapshot(dir_.file("run"));
    extra.push_back("checkpoint.resume=" + ckpt_);
    try {
      Trainer t(config(extra));
      t.run();
      ADD_FAILURE() << "expected an error containing " << needles[0];
    } catch (const Error& e) {
      for (const std::string& n : needles) EXPECT_NE(std::string(e.what()).find(n), std::string::npos) << e.what();
    }
    EXPECT_EQ(snapshot(dir_.file("run")), before) << "run.dir was modified";
  }
  void write(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::trunc) << text; }
  std::string read(const std::string& path) {
    std::ifstream in(path);
    return {std::istreambuf_iterator<char>(in), {}};
  }

  TempDir dir_{"bad-checkpoint"};
  std::string ckpt_;
};

}  // namespace

TEST_F(BadCheckpoint, MissingOrUnparsableManifestOrUnknownVersion) {
  const std::string manifest = ckpt_ + "/manifest.json", text = read(manifest);
  write(manifest, "{\"format_version\": 1, \"step\": ");
  expect_refused({}, {manifest, "not valid JSON"});
  std::string v99 = text;
  v99.replace(v99.find("\"format_version\": 1"), 19, "\"format_version\": 99");
  write(manifest, v99);
  expect_refused({}, {manifest, "format version 99 is not known"});
  fs::remove(manifest);
  expect_refused({}, {manifest, "missing", "not a checkpoint"});
}

TEST_F(BadCheckpoint, MissingTruncatedOrCorruptFile) {
  const std::string h5 = ckpt_ + "/rank00000.h5";
  const std::string bytes = read(h5);
  fs::resize_file(h5, bytes.size() / 2);
  expect_refused({}, {h5, "truncated"});
  std::string flipped = bytes;
  flipped[flipped.size() / 2] = static_cast<char>(~flipped[flipped.size() / 2]);
  write(h5, flipped);
  expect_refused({}, {h5, "checksum", "corrupt"});
  fs::remove(h5);
  expect_refused({}, {h5, "missing"});
}

TEST_F(BadCheckpoint, MissingTensorOrOtherShape) {
  // Accepted config changes that the checkpoint's tensors cannot satisfy.
  expect_refused({"model.n_layers=3", "checkpoint.allow_changes=[model.n_layers]"},
                 {"rank00000.h5", "tensor 'params/blocks.2.", "is missing"});
  expect_refused({"model.mlp_hidden=128", "checkpoint.allow_changes=[model.mlp_hidden]"},
                 {"rank00000.h5", "tensor 'params/blocks.0.mlp_", "has shape", "this run needs"});
}

TEST_F(BadCheckpoint, KeysThatMustNotChangeAreNamedWithBothValues) {
  expect_refused({"optim.lr=0.02"}, {"optim.lr: 0.01 in the checkpoint, 0.02 now", "checkpoint.allow_changes"});
  expect_refused({"model.z_loss=0.001"}, {"model.z_loss"});
  expect_refused({"optim.name=shampoo"}, {"optim.name"});
  expect_refused({"optim.max_preconditioner_dim=16"}, {"optim.max_preconditioner_dim"});
  expect_refused({"seed=10"}, {"seed: 9 in the checkpoint, 10 now"});
  expect_refused({"train.micro_batch=2"}, {"train.micro_batch"});
  expect_refused({"train.grad_accum=2"}, {"train.grad_accum"});
  expect_refused({"data.train=" + dir_.file("other.bin")}, {"other.bin", "is not the token file it was trained on"});
}

TEST_F(BadCheckpoint, KeysThatMayChangeOrAreAllowedResume) {
  // train.steps, checkpoint.*, run.* and runtime threads may change; optim.lr when allowed.
  Trainer t(config({"checkpoint.resume=" + ckpt_, "train.steps=5", "checkpoint.keep=1", "optim.lr=0.02",
                    "checkpoint.allow_changes=[optim.lr]", "runtime.threads=1"}));
  EXPECT_EQ(t.run().last_step, 5);
}
