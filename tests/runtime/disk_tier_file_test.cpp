// The disk tier's file (runtime/disk_tier_file.hpp): round trips, and corruption is detected.
#include <gtest/gtest.h>

#include <filesystem>
#include <cstring>
#include <fstream>
#include <random>
#include <string>

#include "core/buffer.hpp"
#include "core/error.hpp"
#include "runtime/tier_layout.hpp"
#include "runtime/disk_tier_file.hpp"

using namespace asteria;

namespace {

class DiskTierFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("asteria-disk-tier-" + std::to_string(std::random_device{}()));
    path_ = (dir_ / "sub" / "state.bin").string();   // the directory is created on demand
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // A page-padded buffer of `floats` floats filled from `seed`.
  static Buffer<float> data(size_t floats, uint32_t seed) {
    Buffer<float> b(page_round(floats * 4) / 4, kTierPage);
    std::mt19937 rng(seed);
    for (size_t i = 0; i < floats; ++i) b.data()[i] = std::uniform_real_distribution<float>(-1, 1)(rng);
    return b;
  }

  void flip_byte(size_t at) {
    std::fstream f(path_, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(static_cast<std::streamoff>(at));
    char c;
    f.read(&c, 1);
    c = static_cast<char>(c ^ 0x20);
    f.seekp(static_cast<std::streamoff>(at));
    f.write(&c, 1);
  }

  std::filesystem::path dir_;
  std::string path_;
};

// Two states: 1000 floats at offset 0 (slot 1 + 1 pages), 3000 floats after it (1 + 3 pages).
constexpr size_t kSmall = 1000, kLarge = 3000;
const size_t kLargeAt = disk_slot_bytes(kSmall * 4);

}  // namespace

TEST_F(DiskTierFileTest, RoundTripsAndReadsUnwrittenSlotsAsZeros) {
  DiskTierFile f(path_, kLargeAt + disk_slot_bytes(kLarge * 4), 2);
  Buffer<float> a = data(kSmall, 1), b = data(kLarge, 2), back = data(kLarge, 3);
  f.read(1, "b", kLargeAt, back.data(), kLarge * 4);
  for (size_t i = 0; i < kLarge; ++i) ASSERT_EQ(back.data()[i], 0.0f);
  EXPECT_TRUE(f.write(0, "a", 0, a.data(), kSmall * 4));
  EXPECT_TRUE(f.write(1, "b", kLargeAt, b.data(), kLarge * 4));
  f.read(0, "a", 0, back.data(), kSmall * 4);
  EXPECT_EQ(std::memcmp(back.data(), a.data(), kSmall * 4), 0);
  f.read(1, "b", kLargeAt, back.data(), kLarge * 4);
  EXPECT_EQ(std::memcmp(back.data(), b.data(), kLarge * 4), 0);
  // Writing the same data again is skipped; changed data is written.
  EXPECT_FALSE(f.write(0, "a", 0, a.data(), kSmall * 4));
  a.data()[7] += 1.0f;
  EXPECT_TRUE(f.write(0, "a", 0, a.data(), kSmall * 4));
  f.read(0, "a", 0, back.data(), kSmall * 4);
  EXPECT_EQ(back.data()[7], a.data()[7]);
  EXPECT_TRUE(std::filesystem::exists(path_));
}

TEST_F(DiskTierFileTest, FileIsRemovedWithTheTier) {
  { DiskTierFile f(path_, disk_slot_bytes(4096), 1); }
  EXPECT_FALSE(std::filesystem::exists(path_));
}

TEST_F(DiskTierFileTest, CorruptDataPageIsAnErrorNamingFileAndState) {
  DiskTierFile f(path_, kLargeAt + disk_slot_bytes(kLarge * 4), 2);
  Buffer<float> b = data(kLarge, 2), back = data(kLarge, 3);
  f.write(1, "blocks.3.mlp_up[0] / L", kLargeAt, b.data(), kLarge * 4);
  flip_byte(kLargeAt + kTierPage + 2 * kTierPage + 17);   // in the third data page
  try {
    f.read(1, "blocks.3.mlp_up[0] / L", kLargeAt, back.data(), kLarge * 4);
    FAIL() << "corrupt data was read without an error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find(path_), std::string::npos) << m;
    EXPECT_NE(m.find("blocks.3.mlp_up[0] / L"), std::string::npos) << m;
    EXPECT_NE(m.find("checksum"), std::string::npos) << m;
  }
}

TEST_F(DiskTierFileTest, CorruptHeaderIsAnError) {
  DiskTierFile f(path_, kLargeAt + disk_slot_bytes(kLarge * 4), 2);
  Buffer<float> a = data(kSmall, 1), back = data(kSmall, 3);
  f.write(0, "a", 0, a.data(), kSmall * 4);
  flip_byte(2);   // the magic
  try {
    f.read(0, "a", 0, back.data(), kSmall * 4);
    FAIL() << "a corrupt header was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("header of state 'a'"), std::string::npos) << e.what();
  }
}

TEST_F(DiskTierFileTest, StoredChecksumRewrittenByAnotherWriterIsStillCaught) {
  // Data and header changed consistently (as if another process wrote the slot): the checksum
  // remembered at the write still refuses it.
  DiskTierFile f(path_, kLargeAt + disk_slot_bytes(kLarge * 4), 2);
  Buffer<float> a = data(kSmall, 1), other = data(kSmall, 9), back = data(kSmall, 3);
  f.write(0, "a", 0, a.data(), kSmall * 4);
  {
    DiskTierFile g(path_ + ".other", disk_slot_bytes(kSmall * 4), 1);
    g.write(0, "a", 0, other.data(), kSmall * 4);
    std::filesystem::copy_file(g.path(), path_ + ".copy");
  }
  // Overwrite the first slot of the file with the other writer's slot.
  std::ifstream in(path_ + ".copy", std::ios::binary);
  std::string slot(disk_slot_bytes(kSmall * 4), '\0');
  in.read(slot.data(), static_cast<std::streamsize>(slot.size()));
  std::fstream out(path_, std::ios::in | std::ios::out | std::ios::binary);
  out.write(slot.data(), static_cast<std::streamsize>(slot.size()));
  out.close();
  EXPECT_THROW(f.read(0, "a", 0, back.data(), kSmall * 4), Error);
}
