#pragma once
// Helpers for the data tests: a temporary folder removed at the end of the test, raw token
// files written byte by byte (independently of TokenFileWriter), and a check that a callable
// throws asteria::Error with given words in its message.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "data/token_file.hpp"

namespace asteria::test {

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "asteria-data-test-XXXXXX").string();
    if (!::mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

inline void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

// Little-endian, written byte by byte so the tests do not share the reader's assumptions.
inline void write_u16(const std::string& path, const std::vector<uint32_t>& ids) {
  std::vector<uint8_t> bytes;
  for (uint32_t id : ids) {
    bytes.push_back(static_cast<uint8_t>(id & 0xFF));
    bytes.push_back(static_cast<uint8_t>((id >> 8) & 0xFF));
  }
  write_bytes(path, bytes);
}

inline void write_u32(const std::string& path, const std::vector<uint32_t>& ids) {
  std::vector<uint8_t> bytes;
  for (uint32_t id : ids)
    for (int shift = 0; shift < 32; shift += 8) bytes.push_back(static_cast<uint8_t>(id >> shift));
  write_bytes(path, bytes);
}

inline std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

template <class F>
void expect_error(F&& f, std::initializer_list<std::string> words) {
  try {
    f();
    ADD_FAILURE() << "expected asteria::Error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    for (const auto& w : words)
      EXPECT_NE(msg.find(w), std::string::npos) << "message lacks \"" << w << "\": " << msg;
  }
}

// A token file whose token i has id i % 1000, so every window shows where it came from.
struct CountingFile {
  TempDir dir;
  TokenFile file;
  explicit CountingFile(uint32_t n) {
    std::vector<uint32_t> ids(n);
    for (uint32_t i = 0; i < n; ++i) ids[i] = i % 1000;
    write_u16(dir.file("train.bin"), ids);
    file = TokenFile(dir.file("train.bin"), TokenDtype::U16, 1000);
  }
};

// Runs a shell command with its output in `log`; fails the test (naming both) unless it exits 0.
inline void run_quietly(const std::string& cmd, const std::string& log) {
  ASSERT_EQ(std::system((cmd + " > " + log + " 2>&1").c_str()), 0) << cmd << " failed; see " << log;
}

}  // namespace asteria::test
