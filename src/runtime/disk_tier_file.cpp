#include "runtime/disk_tier_file.hpp"

#include <fcntl.h>
#include <sys/uio.h>
#include <unistd.h>
#include <xxhash.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "core/error.hpp"
#include "runtime/tier_layout.hpp"

namespace asteria {

namespace {

constexpr char kMagic[8] = {'A', 'S', 'T', 'T', 'I', 'E', 'R', '1'};

struct SlotHeader {
  char magic[8];
  uint64_t state;
  uint64_t bytes;
  uint64_t checksum;   // XXH3-64 of the data bytes
};

}  // namespace

DiskTierFile::DiskTierFile(std::string path, size_t size, size_t num_states)
    : path_(std::move(path)), size_(size), header_(kTierPage, kTierPage), checksum_(num_states, 0),
      written_(num_states, 0) {
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path_).parent_path(), ec);
  open_file(true);
  if (::ftruncate(fd_, static_cast<off_t>(size_)) != 0)
    fail("disk tier: cannot size '", path_, "' to ", size_, " bytes: ", std::strerror(errno));
}

DiskTierFile::~DiskTierFile() {
  if (fd_ >= 0) ::close(fd_);
  std::error_code ec;
  std::filesystem::remove(path_, ec);
}

void DiskTierFile::open_file(bool direct) {
  if (fd_ >= 0) ::close(fd_);
  const int flags = O_RDWR | O_CREAT | O_CLOEXEC;
  fd_ = direct ? ::open(path_.c_str(), flags | O_DIRECT, 0600) : -1;
  direct_ = fd_ >= 0;
  if (!direct_) {
    if (direct)
      std::fprintf(stderr, "asteria: disk tier: O_DIRECT is not supported for '%s' (%s); using buffered I/O\n",
                   path_.c_str(), std::strerror(errno));
    fd_ = ::open(path_.c_str(), flags, 0600);
  }
  if (fd_ < 0) fail("disk tier: cannot open '", path_, "': ", std::strerror(errno));
}

// The header page and the data pages of a slot, in one system call per chunk.
void DiskTierFile::transfer(bool write, size_t offset, void* data, size_t bytes, const std::string& name) {
  iovec iov[2] = {{header_.data(), kTierPage}, {data, page_round(bytes)}};
  size_t done = 0;
  const size_t total = kTierPage + page_round(bytes);
  while (done < total) {
    // Skip the part already transferred.
    iovec part[2];
    int n = 0;
    size_t skip = done;
    for (const iovec& v : iov) {
      if (skip >= v.iov_len) {
        skip -= v.iov_len;
        continue;
      }
      part[n++] = {static_cast<uint8_t*>(v.iov_base) + skip, v.iov_len - skip};
      skip = 0;
    }
    const off_t at = static_cast<off_t>(offset + done);
    const ssize_t r = write ? ::pwritev(fd_, part, n, at) : ::preadv(fd_, part, n, at);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && errno == EINVAL && direct_) {
      // The filesystem accepted O_DIRECT at open but not for this transfer.
      std::fprintf(stderr, "asteria: disk tier: direct I/O failed on '%s' (%s); using buffered I/O\n",
                   path_.c_str(), std::strerror(errno));
      open_file(false);
      continue;
    }
    if (r <= 0)
      fail("disk tier: ", write ? "writing" : "reading", " state '", name, "' at offset ", offset, " of '", path_,
           "' failed: ", r < 0 ? std::strerror(errno) : "unexpected end of file");
    done += static_cast<size_t>(r);
  }
}

bool DiskTierFile::write(int state, const std::string& name, size_t offset, const void* data, size_t bytes) {
  const uint64_t sum = XXH3_64bits(data, bytes);
  if (written_[state] && checksum_[state] == sum) return false;
  std::memset(header_.data(), 0, kTierPage);
  SlotHeader h{};
  std::memcpy(h.magic, kMagic, sizeof kMagic);
  h.state = static_cast<uint64_t>(state);
  h.bytes = bytes;
  h.checksum = sum;
  std::memcpy(header_.data(), &h, sizeof h);
  transfer(true, offset, const_cast<void*>(data), bytes, name);
  checksum_[state] = sum;
  written_[state] = 1;
  return true;
}

void DiskTierFile::read(int state, const std::string& name, size_t offset, void* data, size_t bytes) {
  if (!written_[state]) {
    std::memset(data, 0, bytes);
    return;
  }
  transfer(false, offset, data, bytes, name);
  SlotHeader h;
  std::memcpy(&h, header_.data(), sizeof h);
  const uint64_t sum = XXH3_64bits(data, bytes);
  if (std::memcmp(h.magic, kMagic, sizeof kMagic) != 0 || h.state != static_cast<uint64_t>(state) || h.bytes != bytes)
    fail("disk tier: the header of state '", name, "' at offset ", offset, " of '", path_,
         "' is corrupt (it does not describe this state); the file was damaged or changed by another process");
  if (sum != h.checksum || sum != checksum_[state]) {
    char detail[160];
    std::snprintf(detail, sizeof detail, "data checksum %016llx, stored %016llx, written %016llx",
                  static_cast<unsigned long long>(sum), static_cast<unsigned long long>(h.checksum),
                  static_cast<unsigned long long>(checksum_[state]));
    fail("disk tier: state '", name, "' read from '", path_, "' at offset ", offset, " failed its checksum (",
         detail, "); the file is corrupt, refusing to use it");
  }
}

}  // namespace asteria
