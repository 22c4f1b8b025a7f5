// The checkpoint files' checksums: write_image checksums the file it wrote (remember_file_xxh3),
// and the commit's file_xxh3 then uses that checksum instead of reading the file again; it must
// equal the XXH3 of the file's bytes, and a file changed since must be read again.
#include <gtest/gtest.h>
#include <unistd.h>
#include <xxhash.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <thread>

#include "core/error.hpp"
#include "train/checkpoint/checkpoint_image.hpp"
#include "train/checkpoint/checkpoint_manifest.hpp"
#include "train/checkpoint/checkpoint_store.hpp"

namespace fs = std::filesystem;
using namespace asteria;

namespace {

fs::path temp_dir(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("asteria-" + name + "-" + std::to_string(getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

std::string independent_xxh3(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(XXH3_64bits(bytes.data(), bytes.size())));
  return buf;
}

CheckpointImage small_image() {
  CheckpointImage img;
  ImageBuffer b;
  b.pieces.push_back({"params/w", {64, 1000}, 0, {}});
  b.pieces.push_back({"optim/blocks/w/0_0/L", {64, 64}, 64000, {0, 64, 0, 64}});
  b.data.resize(64000 + 64 * 64);
  for (size_t i = 0; i < b.data.size(); ++i) b.data[i] = static_cast<float>(i % 977) * 0.25f - 3.f;
  img.buffers.push_back(std::move(b));
  img.values["train.step"] = {7};
  return img;
}

void flip_a_byte(const fs::path& p, std::streamoff at) {
  std::fstream f(p, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(at);
  char c = 0;
  f.read(&c, 1);
  c = static_cast<char>(c ^ 0x5a);
  f.seekp(at);
  f.write(&c, 1);
}

}  // namespace

TEST(CheckpointFiles, WrittenFileChecksumIsTheFilesXxh3) {
  const fs::path d = temp_dir("ckfiles-a");
  const fs::path p = d / "rank00000.h5";
  write_image(p.string(), small_image());
  const std::string expected = independent_xxh3(p);
  EXPECT_EQ(file_xxh3(p.string()), expected);   // the remembered checksum
  EXPECT_EQ(file_xxh3(p.string()), expected);   // read again
  EXPECT_EQ(remember_file_xxh3(p.string()), expected);
  fs::remove_all(d);
}

TEST(CheckpointFiles, CommitRecordsTheChecksumOfTheBytesOnDiskAndVerifyDetectsCorruption) {
  const fs::path root = temp_dir("ckfiles-b");
  Manifest m;
  m.step = 3;
  m.config = "seed: 1\n";
  m.config_hash = text_xxh3(m.config);
  const std::string dir = commit_checkpoint(root.string(), m, [](const std::string& tmp) {
    write_image((fs::path(tmp) / "rank00000.h5").string(), small_image());
    return std::vector<std::string>{"rank00000.h5"};
  });
  const Manifest got = read_manifest((fs::path(dir) / "manifest.json").string());
  ASSERT_EQ(got.files.size(), 1u);
  const fs::path file = fs::path(dir) / "rank00000.h5";
  EXPECT_EQ(got.files[0].xxh3, independent_xxh3(file));
  EXPECT_EQ(got.files[0].bytes, fs::file_size(file));
  EXPECT_NO_THROW(verify_files(dir, got));
  flip_a_byte(file, static_cast<std::streamoff>(fs::file_size(file) / 2));
  try {
    verify_files(dir, got);
    ADD_FAILURE() << "a corrupt file passed";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("corrupt"), std::string::npos) << e.what();
  }
  fs::remove_all(root);
}

TEST(CheckpointFiles, AFileChangedAfterItWasChecksummedIsReadAgain) {
  const fs::path d = temp_dir("ckfiles-c");
  const fs::path p = d / "rank00000.h5";
  write_image(p.string(), small_image());
  const std::string before = independent_xxh3(p);
  // Past the filesystem's timestamp granularity, so the change shows in mtime / ctime.
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  flip_a_byte(p, 100);
  const std::string after = independent_xxh3(p);
  ASSERT_NE(before, after);
  EXPECT_EQ(file_xxh3(p.string()), after);
  fs::remove_all(d);
}

TEST(CheckpointFiles, RowBlocksOfATensorReadAsWholeAndWholeTensorsReadAsRowBlocks) {
  // A checkpoint of W ranks stores a tensor cut into row-blocks ("<name>/rows_<a>_<b>"); one of
  // one rank stores it whole. A reader of another world size asks for other row ranges: rows of
  // a whole tensor, the whole of a cut one, or the same row-blocks.
  const fs::path d = temp_dir("row-blocks");
  const int64_t rows = 6, cols = 3;
  std::vector<float> values(rows * cols);
  for (size_t i = 0; i < values.size(); ++i) values[i] = 0.5f * static_cast<float>(i) - 1.f;
  auto slice = [&](int64_t r0, int64_t n) {
    return StatePiece{"optim/adamw/wte/m", {n, cols}, 0, {}, r0, rows};
  };
  CheckpointImage whole, cut;
  whole.buffers.push_back({{StatePiece{"optim/adamw/wte/m", {rows, cols}, 0, {}}}, values});
  cut.buffers.push_back({{slice(0, 4)}, std::vector<float>(values.begin(), values.begin() + 4 * cols)});
  cut.buffers.push_back({{slice(4, 2)}, std::vector<float>(values.begin() + 4 * cols, values.end())});
  write_image((d / "whole.h5").string(), whole);
  write_image((d / "cut.h5").string(), cut);
  for (const char* file : {"whole.h5", "cut.h5"}) {
    SCOPED_TRACE(file);
    CheckpointImage as_whole;
    as_whole.buffers.push_back({{StatePiece{"optim/adamw/wte/m", {rows, cols}, 0, {}}}, std::vector<float>(rows * cols)});
    read_image((d / file).string(), as_whole);
    EXPECT_EQ(as_whole.buffers[0].data, values);
    CheckpointImage as_cut;
    as_cut.buffers.push_back({{slice(0, 4)}, std::vector<float>(4 * cols)});
    as_cut.buffers.push_back({{slice(4, 2)}, std::vector<float>(2 * cols)});
    read_image((d / file).string(), as_cut);
    EXPECT_EQ(as_cut.buffers[0].data, std::vector<float>(values.begin(), values.begin() + 4 * cols));
    EXPECT_EQ(as_cut.buffers[1].data, std::vector<float>(values.begin() + 4 * cols, values.end()));
  }
  // Rows no row-block holds, and a row-block that straddles what the reader needs.
  CheckpointImage partial;
  partial.buffers.push_back({{slice(0, 4)}, std::vector<float>(values.begin(), values.begin() + 4 * cols)});
  write_image((d / "partial.h5").string(), partial);
  CheckpointImage need;
  need.buffers.push_back({{StatePiece{"optim/adamw/wte/m", {rows, cols}, 0, {}}}, std::vector<float>(rows * cols)});
  try {
    check_image((d / "partial.h5").string(), need);
    FAIL() << "missing rows were not noticed";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'optim/adamw/wte/m' is missing rows 4-5"), std::string::npos) << e.what();
  }
  CheckpointImage straddle;
  straddle.buffers.push_back({{slice(2, 4)}, std::vector<float>(4 * cols)});
  EXPECT_THROW(check_image((d / "cut.h5").string(), straddle), Error);
  fs::remove_all(d);
}
