#include "data/token_writer.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

#include "core/error.hpp"

namespace asteria {

TokenFileWriter::TokenFileWriter(const std::string& path, TokenDtype dtype)
    : path_(path), tmp_path_(path + ".tmp." + std::to_string(::getpid())), dtype_(dtype) {
  file_ = std::fopen(tmp_path_.c_str(), "wb");
  if (!file_) fail("cannot create token file ", tmp_path_, ": ", std::strerror(errno));
}

TokenFileWriter::~TokenFileWriter() {
  if (file_) {
    std::fclose(file_);
    std::remove(tmp_path_.c_str());
  }
}

void TokenFileWriter::append(const int32_t* ids, size_t n) {
  ASTERIA_ASSERT(file_, "append after commit to ", path_);
  const uint64_t limit = dtype_ == TokenDtype::U16 ? 0xFFFFu : 0xFFFFFFFFu;
  // Narrow in chunks: a document of any length needs no buffer of its size.
  constexpr size_t kChunk = 1 << 16;
  std::vector<uint16_t> u16;
  std::vector<uint32_t> u32;
  for (size_t begin = 0; begin < n; begin += kChunk) {
    const size_t m = std::min(kChunk, n - begin);
    for (size_t i = 0; i < m; ++i) {
      const int32_t id = ids[begin + i];
      if (id < 0 || static_cast<uint64_t>(id) > limit)
        fail("token file ", path_, ": token ", count_ + begin + i, " has id ", id,
             ", which does not fit in ", to_string(dtype_));
    }
    size_t written;
    if (dtype_ == TokenDtype::U16) {
      u16.assign(ids + begin, ids + begin + m);
      written = std::fwrite(u16.data(), sizeof(uint16_t), m, file_);
    } else {
      u32.assign(ids + begin, ids + begin + m);
      written = std::fwrite(u32.data(), sizeof(uint32_t), m, file_);
    }
    if (written != m) fail("cannot write token file ", tmp_path_, ": ", std::strerror(errno));
  }
  count_ += n;
}

void TokenFileWriter::commit() {
  ASTERIA_ASSERT(file_, "commit twice to ", path_);
  const bool flushed = std::fflush(file_) == 0 && ::fsync(::fileno(file_)) == 0;
  const int flush_errno = errno;
  const bool closed = std::fclose(file_) == 0;
  file_ = nullptr;
  if (!flushed || !closed) {
    std::remove(tmp_path_.c_str());
    fail("cannot write token file ", tmp_path_, ": ", std::strerror(flushed ? errno : flush_errno));
  }
  if (std::rename(tmp_path_.c_str(), path_.c_str()) != 0) {
    const int e = errno;
    std::remove(tmp_path_.c_str());
    fail("cannot rename ", tmp_path_, " to ", path_, ": ", std::strerror(e));
  }
}

}  // namespace asteria
