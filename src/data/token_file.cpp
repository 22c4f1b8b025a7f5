#include "data/token_file.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <limits>
#include <utility>

#include "core/error.hpp"

namespace asteria {

// The files are little-endian on disk and read in place; every target machine is x86-64.
static_assert(std::endian::native == std::endian::little, "token files are read in place as LE");

TokenDtype token_dtype_for_vocab(int64_t vocab_size) {
  ASTERIA_CHECK(vocab_size > 0, "vocabulary size must be positive, got ", vocab_size);
  return vocab_size <= 65535 ? TokenDtype::U16 : TokenDtype::U32;
}

size_t token_dtype_bytes(TokenDtype d) { return d == TokenDtype::U16 ? 2 : 4; }

const char* to_string(TokenDtype d) { return d == TokenDtype::U16 ? "uint16" : "uint32"; }

namespace {

// Closes a descriptor on every path out of the constructor; the mapping outlives it.
struct FdGuard {
  int fd;
  ~FdGuard() {
    if (fd >= 0) ::close(fd);
  }
};

// Index of the first id >= vocab_size (or n when there is none), and the largest id seen.
template <class T>
std::pair<size_t, uint32_t> scan_ids(const T* ids, size_t n, uint64_t vocab_size) {
  T max_id = 0;
  for (size_t i = 0; i < n; ++i) {
    if (ids[i] >= vocab_size) return {i, max_id};
    max_id = std::max(max_id, ids[i]);
  }
  return {n, max_id};
}

}  // namespace

TokenFile::TokenFile(const std::string& path, TokenDtype dtype, int64_t vocab_size)
    : path_(path), dtype_(dtype) {
  // Tokens are handed out as int32, so every valid id must fit in one.
  ASTERIA_CHECK(vocab_size > 0 && vocab_size <= int64_t{std::numeric_limits<int32_t>::max()} + 1,
                "token file ", path, ": vocabulary size ", vocab_size,
                " is out of range (1 .. 2^31)");
  FdGuard fd{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (fd.fd < 0) fail("cannot open token file ", path, ": ", std::strerror(errno));
  struct stat st {};
  if (::fstat(fd.fd, &st) != 0) fail("cannot stat token file ", path, ": ", std::strerror(errno));
  if (!S_ISREG(st.st_mode)) fail("token file ", path, " is not a regular file");
  const size_t bytes = static_cast<size_t>(st.st_size);
  const size_t width = token_dtype_bytes(dtype);
  if (bytes == 0) fail("token file ", path, " is empty (0 bytes)");
  if (bytes % width != 0)
    fail("token file ", path, ": size ", bytes, " bytes is not a multiple of ", width,
         " bytes (", to_string(dtype), "); truncated file or wrong dtype?");

  void* map = ::mmap(nullptr, bytes, PROT_READ, MAP_PRIVATE, fd.fd, 0);
  if (map == MAP_FAILED) fail("cannot map token file ", path, ": ", std::strerror(errno));
  map_ = map;
  map_bytes_ = bytes;
  count_ = bytes / width;

  // One sequential pass validates every id up front, so a bad file is refused at open rather
  // than in the middle of a run.
  ::madvise(map, bytes, MADV_SEQUENTIAL);
  auto [bad, max_id] =
      dtype == TokenDtype::U16
          ? scan_ids(static_cast<const uint16_t*>(map_), count_, static_cast<uint64_t>(vocab_size))
          : scan_ids(static_cast<const uint32_t*>(map_), count_, static_cast<uint64_t>(vocab_size));
  if (bad != count_) {
    const uint32_t id = (*this)[bad];
    ::munmap(map, bytes);
    map_ = nullptr;
    fail("token file ", path, ": token ", bad, " has id ", id, ", not below the vocabulary size ",
         vocab_size, " (wrong --vocab-size, dtype, or a corrupt file?)");
  }
  max_id_ = max_id;
  // Training reads instances in random order.
  ::madvise(map, bytes, MADV_RANDOM);
}

TokenFile::~TokenFile() {
  if (map_) ::munmap(const_cast<void*>(map_), map_bytes_);
}

TokenFile::TokenFile(TokenFile&& o) noexcept { *this = std::move(o); }

TokenFile& TokenFile::operator=(TokenFile&& o) noexcept {
  if (this != &o) {
    if (map_) ::munmap(const_cast<void*>(map_), map_bytes_);
    path_ = std::move(o.path_);
    dtype_ = o.dtype_;
    map_ = std::exchange(o.map_, nullptr);
    map_bytes_ = std::exchange(o.map_bytes_, 0);
    count_ = std::exchange(o.count_, 0);
    max_id_ = std::exchange(o.max_id_, 0);
  }
  return *this;
}

uint32_t TokenFile::operator[](size_t i) const {
  ASTERIA_ASSERT(i < count_, "token index ", i, " out of range for ", path_, " (", count_, ")");
  return dtype_ == TokenDtype::U16 ? static_cast<const uint16_t*>(map_)[i]
                                   : static_cast<const uint32_t*>(map_)[i];
}

void TokenFile::read(size_t begin, size_t n, int32_t* out) const {
  ASTERIA_ASSERT(begin <= count_ && n <= count_ - begin, "read [", begin, ", ", begin + n,
                 ") out of range for ", path_, " (", count_, " tokens)");
  // Ids were checked against a vocabulary of at most 2^31 at open, so the casts are exact.
  if (dtype_ == TokenDtype::U16) {
    const uint16_t* src = static_cast<const uint16_t*>(map_) + begin;
    for (size_t i = 0; i < n; ++i) out[i] = static_cast<int32_t>(src[i]);
  } else {
    const uint32_t* src = static_cast<const uint32_t*>(map_) + begin;
    for (size_t i = 0; i < n; ++i) out[i] = static_cast<int32_t>(src[i]);
  }
}

}  // namespace asteria
