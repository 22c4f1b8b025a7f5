#pragma once
// The shadow pipeline's refreshes in flight on the disk tier (runtime.shadow.resident_jobs): the
// fp64 buffers of a refresh job that waits (for its next part, or for its publish step) written to
// a file and lent to another job, read back into a lent buffer set when it is needed again.
//
// A job's image is its arrays, each whole, in a fixed order (the job's scalars stay in memory);
// a finished job's image leaves out its inputs (the factors and the parts' carries: a finished
// job is only installed, synced or checkpointed). Bits in, bits out: the parked job reads back
// exactly, so placement never changes the math. Every image is checked on reading against the
// XXH3 checksum taken when it was written: a damaged file is an asteria::Error naming it, never
// used. Transfers go through one page-aligned buffer with O_DIRECT (buffered I/O where the
// filesystem refuses it): parked jobs do not fill the page cache, which a memory cgroup counts.
// Extents are best-fit ranges of the file, which grows only to the most images parked at once
// (an image written over a freed one's range first). Not thread-safe: its owner serializes the
// calls.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/buffer.hpp"
#include "optim/preconditioner.hpp"
#include "runtime/offset_allocator.hpp"

namespace asteria {

// Where a parked job's image is, and what is needed to read it back.
struct ParkedImage {
  bool on_disk = false;
  size_t offset = 0, bytes = 0;
  uint64_t checksum = 0;
  std::vector<size_t> sizes;   // elements of each array (refresh_job_arrays' order)
};

class ShadowJobStore {
 public:
  // path: the file (created when the first job is parked; removed with the store).
  explicit ShadowJobStore(std::string path);
  ~ShadowJobStore();
  ShadowJobStore(const ShadowJobStore&) = delete;
  ShadowJobStore& operator=(const ShadowJobStore&) = delete;

  // Writes the job's image (only its results when `finished`) into a new extent of `where`.
  // The job's arrays are left as they were (the caller lends them on).
  void park(const RefreshJob& job, bool finished, ParkedImage& where, const std::string& name);
  // Reads `where`'s image into the job's arrays (resized; no allocation within their capacity)
  // and frees its extent.
  void unpark(RefreshJob& job, ParkedImage& where, const std::string& name);
  // Frees the extent of an image never read back (a job dropped).
  void discard(ParkedImage& where);

  // The bytes of a job's image as park writes it (its extent: page-rounded).
  static size_t image_bytes(const RefreshJob& job, bool finished);

  uint64_t bytes_written() const { return written_; }
  uint64_t bytes_read() const { return read_; }
  size_t bytes_parked() const { return extents_.used(); }
  const std::string& path() const { return path_; }

 private:
  void open_file(bool direct);
  // One transfer of `bytes` (page-rounded) at `offset`, through bounce_.
  void transfer(bool write, size_t offset, size_t bytes, const std::string& name);

  std::string path_;
  int fd_ = -1;
  bool direct_ = false;
  OffsetAllocator extents_;
  Buffer<uint8_t> bounce_;
  uint64_t written_ = 0, read_ = 0;
};

// Exchanges the arrays (and so their buffers) of two jobs; the scalars stay.
void swap_refresh_job_arrays(RefreshJob& a, RefreshJob& b);

}  // namespace asteria
