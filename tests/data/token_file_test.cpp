#include "data/token_file.hpp"

#include <vector>

#include "test_files.hpp"

namespace asteria {
namespace {

using test::expect_error;
using test::TempDir;

TEST(TokenDtype, ChosenByVocabularySize) {
  EXPECT_EQ(token_dtype_for_vocab(4096), TokenDtype::U16);
  EXPECT_EQ(token_dtype_for_vocab(50304), TokenDtype::U16);
  EXPECT_EQ(token_dtype_for_vocab(65535), TokenDtype::U16);
  EXPECT_EQ(token_dtype_for_vocab(65536), TokenDtype::U32);
  EXPECT_EQ(token_dtype_for_vocab(100352), TokenDtype::U32);
  EXPECT_EQ(token_dtype_bytes(TokenDtype::U16), 2u);
  EXPECT_EQ(token_dtype_bytes(TokenDtype::U32), 4u);
  EXPECT_STREQ(to_string(TokenDtype::U16), "uint16");
  EXPECT_STREQ(to_string(TokenDtype::U32), "uint32");
  expect_error([] { token_dtype_for_vocab(0); }, {"vocabulary size", "0"});
}

TEST(TokenFile, ReadsUint16) {
  TempDir dir;
  const std::vector<uint32_t> ids = {0, 1, 258, 4095, 65534, 7};
  test::write_u16(dir.file("a.bin"), ids);
  TokenFile f(dir.file("a.bin"), TokenDtype::U16, 65535);
  EXPECT_EQ(f.size(), ids.size());
  EXPECT_EQ(f.dtype(), TokenDtype::U16);
  EXPECT_EQ(f.path(), dir.file("a.bin"));
  EXPECT_EQ(f.max_id(), 65534u);
  for (size_t i = 0; i < ids.size(); ++i) EXPECT_EQ(f[i], ids[i]);
  std::vector<int32_t> out(3, -1);
  f.read(2, 3, out.data());
  EXPECT_EQ(out, (std::vector<int32_t>{258, 4095, 65534}));
}

TEST(TokenFile, ReadsUint32) {
  TempDir dir;
  const std::vector<uint32_t> ids = {100351, 0, 65536, 70000, 1};
  test::write_u32(dir.file("a.bin"), ids);
  TokenFile f(dir.file("a.bin"), TokenDtype::U32, 100352);
  EXPECT_EQ(f.size(), ids.size());
  EXPECT_EQ(f.max_id(), 100351u);
  std::vector<int32_t> out(ids.size());
  f.read(0, ids.size(), out.data());
  EXPECT_EQ(out, (std::vector<int32_t>{100351, 0, 65536, 70000, 1}));
}

TEST(TokenFile, MovesOwnership) {
  TempDir dir;
  test::write_u16(dir.file("a.bin"), {3, 4, 5});
  TokenFile a(dir.file("a.bin"), TokenDtype::U16, 10);
  TokenFile b(std::move(a));
  EXPECT_EQ(b.size(), 3u);
  EXPECT_EQ(b[2], 5u);
  TokenFile c;
  c = std::move(b);
  EXPECT_EQ(c[0], 3u);
  EXPECT_EQ(c.max_id(), 5u);
}

TEST(TokenFile, MissingFileIsAnError) {
  TempDir dir;
  expect_error([&] { TokenFile(dir.file("nope.bin"), TokenDtype::U16, 10); },
               {dir.file("nope.bin"), "cannot open", "No such file"});
}

TEST(TokenFile, FolderIsAnError) {
  TempDir dir;
  expect_error([&] { TokenFile(dir.path().string(), TokenDtype::U16, 10); },
               {dir.path().string(), "not a regular file"});
}

TEST(TokenFile, EmptyFileIsAnError) {
  TempDir dir;
  test::write_bytes(dir.file("empty.bin"), {});
  expect_error([&] { TokenFile(dir.file("empty.bin"), TokenDtype::U16, 10); },
               {dir.file("empty.bin"), "empty"});
}

TEST(TokenFile, SizeNotAMultipleOfTheDtypeIsAnError) {
  TempDir dir;
  test::write_bytes(dir.file("odd.bin"), {1, 0, 2});
  expect_error([&] { TokenFile(dir.file("odd.bin"), TokenDtype::U16, 10); },
               {dir.file("odd.bin"), "3 bytes", "multiple of 2", "uint16"});
  test::write_bytes(dir.file("six.bin"), {1, 0, 2, 0, 3, 0});
  expect_error([&] { TokenFile(dir.file("six.bin"), TokenDtype::U32, 10); },
               {dir.file("six.bin"), "6 bytes", "multiple of 4", "uint32"});
}

TEST(TokenFile, IdOutsideTheVocabularyIsAnErrorWithItsIndex) {
  TempDir dir;
  test::write_u16(dir.file("bad.bin"), {1, 2, 3, 4096, 5});
  expect_error([&] { TokenFile(dir.file("bad.bin"), TokenDtype::U16, 4096); },
               {dir.file("bad.bin"), "token 3", "id 4096", "vocabulary size 4096"});
  // The last valid id is fine.
  test::write_u16(dir.file("ok.bin"), {4095});
  EXPECT_EQ(TokenFile(dir.file("ok.bin"), TokenDtype::U16, 4096).max_id(), 4095u);
  test::write_u32(dir.file("bad32.bin"), {0, 200000});
  expect_error([&] { TokenFile(dir.file("bad32.bin"), TokenDtype::U32, 100352); },
               {dir.file("bad32.bin"), "token 1", "id 200000"});
}

TEST(TokenFile, VocabularyTooLargeForInt32IsAnError) {
  TempDir dir;
  test::write_u32(dir.file("a.bin"), {1});
  expect_error([&] { TokenFile(dir.file("a.bin"), TokenDtype::U32, int64_t{1} << 32); },
               {dir.file("a.bin"), "vocabulary size"});
}

}  // namespace
}  // namespace asteria
