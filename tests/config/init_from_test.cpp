// model.init_from: the folder's config.json sets the model's architecture when the config loads;
// a key the config or its preset sets must agree (the error names both places), seq_len and
// vocab_size stay the run's own, and a checkpoint's saved config never reads the folder again.
#include <gtest/gtest.h>

#include <filesystem>

#include "config/config.hpp"
#include "core/error.hpp"
#include "hf_test_files.hpp"
#include "test_util.hpp"

using namespace asteria;

namespace {

template <class F>
void expect_error(F&& f, std::initializer_list<std::string> needles) {
  try {
    f();
    FAIL() << "expected an error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    for (const std::string& n : needles) EXPECT_NE(msg.find(n), std::string::npos) << "'" << n << "' not in: " << msg;
  }
}

// An OLMo-1B-shaped config.json (tied, 50304 rows, 2048 positions).
void write_olmo1b_folder(const asteria::testing::TempDir& dir) {
  ModelConfig m = model_preset("olmo-1b");
  asteria::testing::write_json(dir.file("config.json"), asteria::testing::olmo_config_json(m, /*olmo2=*/false));
}

}  // namespace

TEST(InitFrom, ConfigJsonSetsTheArchitecture) {
  asteria::testing::TempDir dir("initfrom");
  write_olmo1b_folder(dir);
  const Config c = load_config_text("model:\n  init_from: " + dir.path().string() + "\n", "c.yaml");
  EXPECT_EQ(c.model.init_from, dir.path().string());
  EXPECT_EQ(c.model.d_model, 2048);
  EXPECT_EQ(c.model.n_layers, 16);
  EXPECT_EQ(c.model.mlp_hidden, 8192);
  EXPECT_EQ(c.model.embedding_size, 50304);
  EXPECT_EQ(c.model.vocab_size, 50304);   // config.json has no tokenizer vocabulary: the rows
  EXPECT_EQ(c.model.seq_len, 2048);
  EXPECT_TRUE(c.model.tied_embeddings);
  EXPECT_EQ(c.model.norm, NormKind::LayerNorm);
  // The preset that agrees with it, and the run's own context and vocabulary.
  const Config p = load_config_text("model:\n  preset: olmo-1b\n  init_from: " + dir.path().string() + "\n", "c.yaml",
                                    {"model.seq_len=512", "model.vocab_size=50280"});
  EXPECT_EQ(p.model.seq_len, 512);
  EXPECT_EQ(p.model.vocab_size, 50280);
  EXPECT_EQ(p.model.d_model, 2048);
}

TEST(InitFrom, AKeyThatDisagreesNamesBothPlaces) {
  asteria::testing::TempDir dir("initfrom");
  write_olmo1b_folder(dir);
  const std::string folder = dir.path().string();
  expect_error([&] { load_config_text("model:\n  init_from: " + folder + "\n  d_model: 1024\n", "c.yaml"); },
               {"c.yaml:3", "model.d_model is 1024", dir.file("config.json"), "gives 2048 (hidden_size)"});
  expect_error([&] { load_config_text("model:\n  init_from: " + folder + "\n", "c.yaml", {"model.tied_embeddings=false"}); },
               {"--set model.tied_embeddings=false", "gives true (tie_word_embeddings)"});
  expect_error([&] { load_config_text("model:\n  preset: olmo2-1b\n  init_from: " + folder + "\n", "c.yaml"); },
               {"model.preset olmo2-1b", "model.embedding_size is 100352", "gives 50304 (vocab_size)"});
  expect_error([&] { load_config_text("model:\n  init_from: " + folder + "\n  norm: rmsnorm\n", "c.yaml"); },
               {"model.norm is rmsnorm", "gives layernorm (model_type olmo)"});
  expect_error([&] { load_config_text("model:\n  init_from: " + folder + "\n", "c.yaml", {"model.vocab_size=60000"}); },
               {"model.embedding_size (50304) must be >= model.vocab_size (60000)"});
  expect_error([&] { load_config_text("model:\n  init_from: " + dir.file("nowhere") + "\n", "c.yaml"); },
               {"c.yaml:2", "model.init_from", "no config.json"});
}

TEST(InitFrom, ASavedConfigDoesNotReadTheFolderAgain) {
  asteria::testing::TempDir dir("initfrom");
  write_olmo1b_folder(dir);
  const Config c = load_config_text("model:\n  init_from: " + dir.path().string() + "\n", "c.yaml");
  const std::string saved = config_to_yaml(c);
  std::filesystem::remove(dir.file("config.json"));
  const Config back = load_saved_config(saved, "manifest.json");
  EXPECT_EQ(back.model.d_model, 2048);
  EXPECT_EQ(back.model.init_from, dir.path().string());
  EXPECT_EQ(config_to_yaml(back), saved);
}
