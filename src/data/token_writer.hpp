#pragma once
// Writes a token file in the format TokenFile reads (headerless little-endian uint16/uint32).
// The tokens go to a temporary file next to the target ("<path>.tmp.<pid>"); commit() flushes it
// and renames it to the final name, so a reader never sees a half-written file under that name.
// A writer destroyed without commit() (an error, an exception) removes its temporary file.
// Every id is checked against the dtype's range as it is appended.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

#include "data/token_file.hpp"

namespace asteria {

class TokenFileWriter {
 public:
  TokenFileWriter(const std::string& path, TokenDtype dtype);
  ~TokenFileWriter();
  TokenFileWriter(const TokenFileWriter&) = delete;
  TokenFileWriter& operator=(const TokenFileWriter&) = delete;

  void append(const int32_t* ids, size_t n);
  size_t count() const { return count_; }   // tokens appended so far
  // Flushes, syncs and renames onto the final path. At most once; nothing may be appended after.
  void commit();

 private:
  std::string path_;
  std::string tmp_path_;
  TokenDtype dtype_;
  std::FILE* file_ = nullptr;
  size_t count_ = 0;
};

}  // namespace asteria
