#include "data/token_writer.hpp"

#include <filesystem>
#include <vector>

#include "data/token_file.hpp"
#include "test_files.hpp"

namespace asteria {
namespace {

using test::TempDir;

TEST(TokenFileWriter, WritesLittleEndianUint16) {
  TempDir dir;
  TokenFileWriter w(dir.file("t.bin"), TokenDtype::U16);
  const std::vector<int32_t> ids = {1, 0x0203, 65535};
  w.append(ids.data(), ids.size());
  EXPECT_FALSE(std::filesystem::exists(dir.file("t.bin"))) << "visible before commit";
  w.commit();
  EXPECT_EQ(w.count(), 3u);
  EXPECT_EQ(test::read_text(dir.file("t.bin")), std::string("\x01\x00\x03\x02\xff\xff", 6));
}

TEST(TokenFileWriter, WritesUint32ThatTokenFileReadsBack) {
  TempDir dir;
  std::vector<int32_t> ids;
  for (int32_t i = 0; i < 200000; i += 7) ids.push_back(i);  // spans several write chunks
  {
    TokenFileWriter w(dir.file("t.bin"), TokenDtype::U32);
    w.append(ids.data(), 10);
    w.append(ids.data() + 10, ids.size() - 10);
    w.commit();
  }
  TokenFile f(dir.file("t.bin"), TokenDtype::U32, 200000);
  ASSERT_EQ(f.size(), ids.size());
  std::vector<int32_t> back(ids.size());
  f.read(0, ids.size(), back.data());
  EXPECT_EQ(back, ids);
}

TEST(TokenFileWriter, WithoutCommitLeavesNothing) {
  TempDir dir;
  test::write_u16(dir.file("t.bin"), {7, 7});  // an earlier, complete file
  {
    TokenFileWriter w(dir.file("t.bin"), TokenDtype::U16);
    const int32_t ids[] = {1, 2, 3};
    w.append(ids, 3);
  }
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir.path()), {}), 1)
      << "temporary file left behind";
  EXPECT_EQ(TokenFile(dir.file("t.bin"), TokenDtype::U16, 10).size(), 2u) << "old file damaged";
}

TEST(TokenFileWriter, IdThatDoesNotFitIsAnError) {
  TempDir dir;
  TokenFileWriter w(dir.file("t.bin"), TokenDtype::U16);
  const int32_t ids[] = {5, 65536};
  test::expect_error([&] { w.append(ids, 2); }, {dir.file("t.bin"), "token 1", "65536", "uint16"});
  const int32_t negative[] = {-1};
  test::expect_error([&] { w.append(negative, 1); }, {"id -1"});
}

TEST(TokenFileWriter, UnwritableFolderIsAnError) {
  TempDir dir;
  test::expect_error([&] { TokenFileWriter(dir.file("missing/t.bin"), TokenDtype::U16); },
                     {dir.file("missing/t.bin"), "cannot create"});
}

}  // namespace
}  // namespace asteria
