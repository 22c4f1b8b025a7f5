#include "runtime/shadow_job_store.hpp"

#include <fcntl.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "core/error.hpp"
#include "runtime/tier_layout.hpp"

namespace asteria {

namespace {

// One transfer's bytes: large enough that O_DIRECT runs near the disk's speed, small beside a
// job (an OLMo-1B SOAP job is 192 MiB).
constexpr size_t kBounceBytes = 8u << 20;
// The store's extents are ranges of a file that grows as needed.
constexpr size_t kVirtualSize = size_t{1} << 50;

// Calls f(array, is_input) for every array of the job, in image order. The inputs are what a
// finished job no longer needs: the factors and the parts' carries.
template <class Job, class F>
void for_each_array(Job& job, F&& f) {
  f(job.left, true);
  f(job.right, true);
  f(job.left_carry.m32, true);
  f(job.left_carry.v32, true);
  f(job.left_carry.m64, true);
  f(job.left_carry.v64, true);
  f(job.right_carry.m32, true);
  f(job.right_carry.v32, true);
  f(job.right_carry.m64, true);
  f(job.right_carry.v64, true);
  f(job.left_basis, false);
  f(job.right_basis, false);
  f(job.left_root, false);
  f(job.right_root, false);
  f(job.left_perm, false);
  f(job.right_perm, false);
  f(job.base_left_perm, false);
  f(job.base_right_perm, false);
  f(job.installed_left, false);
  f(job.installed_right, false);
}

}  // namespace

void swap_refresh_job_arrays(RefreshJob& a, RefreshJob& b) {
  // Pairs the arrays of a and b by their place in the list.
  std::vector<void*> bs;
  for_each_array(b, [&](auto& v, bool) { bs.push_back(&v); });
  size_t i = 0;
  for_each_array(a, [&](auto& v, bool) {
    using V = std::remove_reference_t<decltype(v)>;
    v.swap(*static_cast<V*>(bs[i++]));
  });
}

size_t ShadowJobStore::image_bytes(const RefreshJob& job, bool finished) {
  size_t bytes = 0;
  for_each_array(job, [&](const auto& v, bool input) {
    if (!(finished && input)) bytes += v.size() * sizeof(v[0]);
  });
  return page_round(bytes);
}

ShadowJobStore::ShadowJobStore(std::string path) : path_(std::move(path)), extents_(kVirtualSize) {}

ShadowJobStore::~ShadowJobStore() {
  if (fd_ < 0) return;
  ::close(fd_);
  std::error_code ec;
  std::filesystem::remove(path_, ec);
}

void ShadowJobStore::open_file(bool direct) {
  if (fd_ >= 0) ::close(fd_);
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path_).parent_path(), ec);
  const int flags = O_RDWR | O_CREAT | O_CLOEXEC;
  fd_ = direct ? ::open(path_.c_str(), flags | O_DIRECT, 0600) : -1;
  direct_ = fd_ >= 0;
  if (!direct_) fd_ = ::open(path_.c_str(), flags, 0600);
  if (fd_ < 0) fail("shadow job store: cannot open '", path_, "': ", std::strerror(errno));
}

void ShadowJobStore::transfer(bool write, size_t offset, size_t bytes, const std::string& name) {
  const size_t total = page_round(bytes);
  size_t done = 0;
  while (done < total) {
    const off_t at = static_cast<off_t>(offset + done);
    const ssize_t r = write ? ::pwrite(fd_, bounce_.data() + done, total - done, at)
                            : ::pread(fd_, bounce_.data() + done, total - done, at);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && errno == EINVAL && direct_) {   // O_DIRECT accepted at open, not for this transfer
      open_file(false);
      continue;
    }
    if (r <= 0)
      fail("shadow job store: ", write ? "writing" : "reading", " the refresh in flight of ", name, " at offset ",
           offset + done, " of '", path_, "' failed: ", r < 0 ? std::strerror(errno) : "unexpected end of file",
           write && errno == ENOSPC ? " (the disk tier's filesystem is full: free space there, or give "
                                      "runtime.shadow.resident_jobs more jobs in memory)"
                                    : "");
    done += static_cast<size_t>(r);
  }
}

void ShadowJobStore::park(const RefreshJob& job, bool finished, ParkedImage& where, const std::string& name) {
  ASTERIA_ASSERT(!where.on_disk, "the refresh of ", name, " is parked twice");
  if (fd_ < 0) open_file(true);
  if (bounce_.size() == 0) bounce_ = Buffer<uint8_t>(kBounceBytes, kTierPage);
  const size_t bytes = image_bytes(job, finished);
  const std::optional<size_t> at = extents_.allocate(std::max(bytes, kTierPage));
  ASTERIA_ASSERT(at.has_value());
  where.offset = *at;
  where.bytes = std::max(bytes, kTierPage);
  where.sizes.clear();
  XXH3_state_t* sum = XXH3_createState();
  XXH3_64bits_reset(sum);
  size_t fill = 0, flushed = 0, raw = 0;
  auto flush = [&] {
    transfer(true, where.offset + flushed, fill, name);
    flushed += page_round(fill);
    fill = 0;
  };
  try {
    for_each_array(job, [&](const auto& v, bool input) {
      const size_t n = finished && input ? 0 : v.size();
      where.sizes.push_back(n);
      const auto* src = reinterpret_cast<const uint8_t*>(v.data());
      size_t left = n * sizeof(v[0]);
      raw += left;
      XXH3_64bits_update(sum, src, left);
      while (left > 0) {
        const size_t take = std::min(left, kBounceBytes - fill);
        std::memcpy(bounce_.data() + fill, src, take);
        fill += take;
        src += take;
        left -= take;
        if (fill == kBounceBytes) flush();
      }
    });
    if (fill > 0) flush();
  } catch (...) {
    XXH3_freeState(sum);
    extents_.release(where.offset, where.bytes);
    throw;
  }
  where.checksum = XXH3_64bits_digest(sum);
  XXH3_freeState(sum);
  where.on_disk = true;
  written_ += raw;
}

void ShadowJobStore::unpark(RefreshJob& job, ParkedImage& where, const std::string& name) {
  ASTERIA_ASSERT(where.on_disk, "the refresh of ", name, " is not parked");
  XXH3_state_t* sum = XXH3_createState();
  XXH3_64bits_reset(sum);
  size_t fill = 0, loaded = 0, consumed = 0, i = 0;
  size_t total = 0;
  // The image's bytes: the sizes times each array's element size, as parked.
  for_each_array(job, [&](auto& v, bool) { total += where.sizes[i++] * sizeof(v[0]); });
  i = 0;
  auto refill = [&] {
    const size_t chunk = std::min(kBounceBytes, page_round(total - consumed));
    transfer(false, where.offset + consumed, chunk, name);
    loaded = chunk;
    fill = 0;
  };
  try {
    for_each_array(job, [&](auto& v, bool) {
      v.resize(where.sizes[i++]);
      auto* dst = reinterpret_cast<uint8_t*>(v.data());
      size_t left = v.size() * sizeof(v[0]);
      while (left > 0) {
        if (fill == loaded) refill();
        const size_t take = std::min(left, std::min(loaded - fill, total - consumed));
        std::memcpy(dst, bounce_.data() + fill, take);
        XXH3_64bits_update(sum, dst, take);
        fill += take;
        consumed += take;
        dst += take;
        left -= take;
      }
    });
  } catch (...) {
    XXH3_freeState(sum);
    throw;
  }
  const uint64_t got = XXH3_64bits_digest(sum);
  XXH3_freeState(sum);
  if (got != where.checksum)
    fail("shadow job store: the refresh in flight of ", name, " read back from '", path_, "' at offset ", where.offset,
         " failed its checksum; the file is corrupt (damaged or changed by another process), refusing to use it");
  read_ += total;
  discard(where);
}

void ShadowJobStore::discard(ParkedImage& where) {
  if (!where.on_disk) return;
  extents_.release(where.offset, where.bytes);
  where.on_disk = false;
}

}  // namespace asteria
