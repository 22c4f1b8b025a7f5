// The checkpoint directories: names, the commit protocol's outcome, `latest`, stale
// temporaries, retention (keep / keep_every), and the manifest's checks.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "core/error.hpp"
#include "train/checkpoint/checkpoint_store.hpp"

using namespace asteria;
namespace fs = std::filesystem;

namespace {

struct TempRoot {
  fs::path path = fs::temp_directory_path() / ("asteria-ckstore-" + std::to_string(std::random_device{}()));
  ~TempRoot() { fs::remove_all(path); }
  std::string str() const { return path.string(); }
};

std::string commit(const TempRoot& root, int64_t step, const std::string& payload = "data") {
  Manifest m;
  m.step = step;
  m.config = "seed: 1\n";
  m.config_hash = text_xxh3(m.config);
  return commit_checkpoint(root.str(), m, [&](const std::string& tmp) {
    std::ofstream(tmp + "/rank00000.h5") << payload;
    return std::vector<std::string>{"rank00000.h5"};
  });
}

std::vector<int64_t> steps(const TempRoot& root) {
  std::vector<int64_t> out;
  for (const StoredCheckpoint& c : list_checkpoints(root.str())) out.push_back(c.step);
  return out;
}

}  // namespace

TEST(CheckpointStore, CommitWritesAVerifiedCheckpointAndLatestFindsIt) {
  TempRoot root;
  EXPECT_EQ(checkpoint_dir_name(42), "step00000042");
  EXPECT_FALSE(latest_checkpoint(root.str()).has_value());
  const std::string dir = commit(root, 7, "seven");
  EXPECT_EQ(dir, (root.path / "step00000007").string());
  const Manifest m = read_manifest(dir + "/manifest.json");
  ASSERT_EQ(m.files.size(), 1u);
  EXPECT_EQ(m.files[0].bytes, 5u);
  EXPECT_EQ(m.files[0].xxh3, file_xxh3(dir + "/rank00000.h5"));
  EXPECT_NO_THROW(verify_files(dir, m));
  commit(root, 12);
  EXPECT_EQ(latest_checkpoint(root.str())->step, 12);
  // Nothing temporary is left behind.
  for (const auto& e : fs::directory_iterator(root.path)) EXPECT_EQ(e.path().filename().string().find(".tmp"), std::string::npos);
}

TEST(CheckpointStore, StaleTemporariesAndManifestlessDirectoriesAreNotCheckpointsAndAreRemoved) {
  TempRoot root;
  commit(root, 3);
  fs::create_directories(root.path / "step00000005.tmp-123-0");
  fs::create_directories(root.path / "step00000006");   // renamed, crashed before its manifest
  std::ofstream(root.path / "step00000006" / "rank00000.h5") << "x";
  EXPECT_EQ(latest_checkpoint(root.str())->step, 3);
  const std::vector<std::string> removed = remove_stale_checkpoints(root.str());
  EXPECT_EQ(removed.size(), 2u);
  EXPECT_FALSE(fs::exists(root.path / "step00000006"));
  EXPECT_FALSE(fs::exists(root.path / "step00000005.tmp-123-0"));
  EXPECT_TRUE(fs::exists(root.path / "step00000003" / "manifest.json"));
}

TEST(CheckpointStore, RetentionKeepsTheNewestAndEveryMth) {
  TempRoot root;
  for (int64_t s : {10, 20, 30, 40, 50, 60}) commit(root, s);
  apply_retention(root.str(), 2, 0);
  EXPECT_EQ(steps(root), (std::vector<int64_t>{50, 60}));
  for (int64_t s : {70, 80, 90, 100}) commit(root, s);
  apply_retention(root.str(), 1, 40);   // the newest, and multiples of 40 for good
  EXPECT_EQ(steps(root), (std::vector<int64_t>{80, 100}));
}

TEST(CheckpointStore, ManifestChecksNameTheFieldAndTheFile) {
  auto expect = [](const std::string& text, const std::string& needle) {
    try {
      parse_manifest(text, "m.json");
      ADD_FAILURE() << "expected an error about " << needle;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("m.json"), std::string::npos) << e.what();
    }
  };
  Manifest m;
  m.step = 5;
  m.config = "seed: 1\n";
  m.config_hash = text_xxh3(m.config);
  m.files = {{"rank00000.h5", 3, "0123456789abcdef"}};
  const std::string good = manifest_json(m);
  EXPECT_EQ(parse_manifest(good, "m.json").step, 5);
  expect("[1, 2]", "not a JSON object");
  expect("{", "not valid JSON");
  std::string no_step = good;
  no_step.replace(no_step.find("\"step\""), 6, "\"stop\"");
  expect(no_step, "field 'step' is missing");
  std::string bad_hash = good;
  bad_hash.replace(bad_hash.find(m.config_hash), 16, "ffffffffffffffff");
  expect(bad_hash, "does not match its hash");
}
