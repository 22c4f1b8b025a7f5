#pragma once
// The disk tier of one process: one file, a fixed slot per state (a header page, then the
// state's data pages), written and read with O_DIRECT where the filesystem allows it (buffered
// I/O otherwise, said once on stderr).
//
// Every write stores an XXH3 checksum of the data in the slot's header page and remembers it;
// every read checks the header (magic, state id, size) and that the data's checksum equals both
// the stored one and the one remembered at the write. A mismatch throws asteria::Error naming
// the file and the state: corrupt state is never used. A slot never written reads as zeros
// (every optimizer state starts as zeros) without touching the file.
// Not thread-safe: the staging lane does all disk I/O.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/buffer.hpp"

namespace asteria {

class DiskTierFile {
 public:
  // Creates (or truncates) `path` with room for `size` bytes, for `num_states` slot ids.
  DiskTierFile(std::string path, size_t size, size_t num_states);
  ~DiskTierFile();   // closes and removes the file
  DiskTierFile(const DiskTierFile&) = delete;
  DiskTierFile& operator=(const DiskTierFile&) = delete;

  // data: 4096-aligned, readable / writable up to the next multiple of 4096 after `bytes`.
  // write returns false (and writes nothing) when the data equals what the slot holds.
  bool write(int state, const std::string& name, size_t offset, const void* data, size_t bytes);
  void read(int state, const std::string& name, size_t offset, void* data, size_t bytes);

  const std::string& path() const { return path_; }
  bool direct_io() const { return direct_; }

 private:
  void open_file(bool direct);
  void transfer(bool write, size_t offset, void* data, size_t bytes, const std::string& name);

  std::string path_;
  size_t size_;
  int fd_ = -1;
  bool direct_ = false;
  Buffer<uint8_t> header_;          // one page, aligned for direct I/O
  std::vector<uint64_t> checksum_;  // per state: of the data last written
  std::vector<uint8_t> written_;
};

}  // namespace asteria
