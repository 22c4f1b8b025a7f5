#pragma once
// Best-fit allocation of ranges in a fixed region [0, size): the device tier's cache region.
// The smallest free range that fits is used (first such on ties), which leaves the large
// ranges whole for large states; adjacent free ranges are merged. Sizes and offsets are whatever the caller uses (here:
// multiples of the tier page).
#include <cstddef>
#include <iterator>
#include <map>
#include <optional>

namespace asteria {

class OffsetAllocator {
 public:
  OffsetAllocator() = default;
  explicit OffsetAllocator(size_t size) : size_(size) {
    if (size) free_[0] = size;
  }
  std::optional<size_t> allocate(size_t bytes) {
    auto best = free_.end();
    for (auto it = free_.begin(); it != free_.end(); ++it)
      if (it->second >= bytes && (best == free_.end() || it->second < best->second)) best = it;
    if (best == free_.end()) return std::nullopt;
    {
      auto it = best;
      const size_t offset = it->first, left = it->second - bytes;
      free_.erase(it);
      if (left) free_[offset + bytes] = left;
      used_ += bytes;
      return offset;
    }
  }
  void release(size_t offset, size_t bytes) {
    used_ -= bytes;
    auto next = free_.lower_bound(offset);
    if (next != free_.end() && next->first == offset + bytes) {   // merge with the range after
      bytes += next->second;
      next = free_.erase(next);
    }
    if (next != free_.begin()) {                                  // merge with the range before
      auto prev = std::prev(next);
      if (prev->first + prev->second == offset) {
        prev->second += bytes;
        return;
      }
    }
    free_[offset] = bytes;
  }
  size_t size() const { return size_; }
  size_t used() const { return used_; }

 private:
  size_t size_ = 0;
  size_t used_ = 0;
  std::map<size_t, size_t> free_;   // offset -> length
};

}  // namespace asteria
