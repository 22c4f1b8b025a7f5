// asteria-export's refusals: unsupported model combinations by name (post-norm LayerNorm is
// refused by the config loader already, so no checkpoint can carry it), and bad checkpoints
// (missing manifest, missing tensor, damaged file), each with exit code 1, a message naming
// what is wrong, and nothing written to --out.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "export_fixture.hpp"

using namespace asteria;
using namespace asteria::testing;

namespace {

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// Nothing named hf or hf.tmp.* exists in dir.
bool nothing_written(const TempDir& dir) {
  for (const auto& e : std::filesystem::directory_iterator(dir.path()))
    if (e.path().filename().string().rfind("hf", 0) == 0) return false;
  return true;
}

// Exports dir/ckpt to dir/hf; returns the exit code, output in *log.
int run_export(const TempDir& dir, std::string* log) {
  return run_command(export_command("--checkpoint " + dir.file("ckpt") + " --out " + dir.file("hf")),
                     log);
}

void write_model_checkpoint(const TempDir& dir, const Config& cfg,
                            const std::set<std::string>& skip = {}) {
  Model<float> m(cfg.model, 1);
  init_model(m, 2);
  write_checkpoint(dir.file("ckpt"), cfg, m, 3, skip);
}

}  // namespace

TEST(Export, RefusesUnsupportedCombinationsByName) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"model.norm=rmsnorm"}, "norm_placement=pre with norm=rmsnorm"},
      {{"model.qk_norm=true"}, "qk_norm=true with norm_placement=pre"},
      {{"model.norm=rmsnorm", "model.norm_placement=post"}, "qk_norm=false with norm_placement=post"},
      {{"model.norm_eps=1e-6"}, "norm=layernorm with norm_eps=1e-06"},
  };
  for (const auto& [sets, words] : cases) {
    TempDir dir("export-refuse");
    write_model_checkpoint(dir, export_config(sets));
    std::string log;
    EXPECT_EQ(run_export(dir, &log), 1) << log;
    EXPECT_TRUE(contains(log, "asteria-export: error: cannot export " + words)) << log;
    EXPECT_TRUE(contains(log, "supported: norm_placement=pre with norm=layernorm")) << log;
    EXPECT_TRUE(nothing_written(dir)) << words;
  }
}

TEST(Export, MissingTensorIsNamedWithItsFile) {
  TempDir dir("export-missing-tensor");
  write_model_checkpoint(dir, export_config({}), {"blocks.1.mlp_down"});
  std::string log;
  EXPECT_EQ(run_export(dir, &log), 1) << log;
  EXPECT_TRUE(contains(log, dir.file("ckpt") + "/rank00000.h5: tensor 'params/blocks.1.mlp_down' is missing")) << log;
  EXPECT_TRUE(nothing_written(dir));
}

TEST(Export, MissingManifestIsNamed) {
  TempDir dir("export-no-manifest");
  write_model_checkpoint(dir, export_config({}));
  std::filesystem::remove(dir.file("ckpt/manifest.json"));
  std::string log;
  EXPECT_EQ(run_export(dir, &log), 1) << log;
  EXPECT_TRUE(contains(log, dir.file("ckpt/manifest.json") + ": missing")) << log;
  EXPECT_TRUE(nothing_written(dir));
}

TEST(Export, DamagedParameterFileFailsItsChecksum) {
  TempDir dir("export-damaged");
  write_model_checkpoint(dir, export_config({}));
  {
    std::fstream f(dir.file("ckpt/rank00000.h5"), std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(-1, std::ios::end);
    const char last = static_cast<char>(f.get());
    f.seekp(-1, std::ios::end);
    f.put(static_cast<char>(~last));   // same size, other bytes
  }
  std::string log;
  EXPECT_EQ(run_export(dir, &log), 1) << log;
  EXPECT_TRUE(contains(log, dir.file("ckpt/rank00000.h5") + ": checksum")) << log;
  EXPECT_TRUE(contains(log, "(corrupt)")) << log;
  EXPECT_TRUE(nothing_written(dir));
}

TEST(Export, NonEmptyOutIsLeftAlone) {
  TempDir dir("export-out-busy");
  write_model_checkpoint(dir, export_config({}));
  std::filesystem::create_directories(dir.file("hf"));
  std::ofstream(dir.file("hf/keep.txt")) << "mine";
  std::string log;
  EXPECT_EQ(run_export(dir, &log), 1) << log;
  EXPECT_TRUE(contains(log, "exists and is not an empty folder")) << log;
  EXPECT_EQ(read_file_bytes(dir.file("hf/keep.txt")), "mine");
  EXPECT_FALSE(std::filesystem::exists(dir.file("hf/config.json")));
}
