#include "fsdp/param_offload.hpp"

#include <algorithm>
#include <cstring>

#include "core/error.hpp"
#include "runtime/tier_layout.hpp"

namespace asteria {

namespace {

// The pool's buffers hold whole pages, so that each starts page-aligned for direct I/O.
size_t slot_floats(const std::vector<size_t>& floats, const std::vector<bool>& on_disk) {
  size_t largest = 0;
  for (size_t l = 0; l < floats.size(); ++l)
    if (on_disk[l]) largest = std::max(largest, floats[l]);
  return page_round(largest * sizeof(float)) / sizeof(float);
}

}  // namespace

ParamOffloadBytes param_offload_bytes(const std::vector<size_t>& floats, const std::vector<bool>& on_disk, int buffers) {
  ParamOffloadBytes b;
  bool any = false;
  for (size_t l = 0; l < floats.size(); ++l) {
    if (on_disk[l]) {
      b.on_disk += disk_slot_bytes(floats[l] * sizeof(float));
      any = true;
    } else {
      b.in_memory += floats[l] * sizeof(float);
    }
  }
  if (any) b.in_memory += static_cast<size_t>(buffers) * slot_floats(floats, on_disk) * sizeof(float);
  return b;
}

OffloadedParams::OffloadedParams(std::vector<size_t> floats, std::vector<bool> on_disk, std::vector<std::string> names,
                                 int buffers, const std::string& path, double timeout_s)
    : floats_(std::move(floats)), on_disk_(std::move(on_disk)), names_(std::move(names)), buffers_(buffers) {
  ASTERIA_ASSERT(floats_.size() == on_disk_.size() && names_.size() == floats_.size() && buffers >= 1);
  resident_.resize(floats_.size());
  offset_.assign(floats_.size(), 0);
  size_t file_bytes = 0;
  for (size_t l = 0; l < floats_.size(); ++l) {
    if (!on_disk_[l]) {
      resident_[l].resize(floats_[l]);
      continue;
    }
    offset_[l] = file_bytes;
    file_bytes += disk_slot_bytes(floats_[l] * sizeof(float));
  }
  slots_ = std::make_unique<LayerSlots>("offloaded parameter", buffers, slot_floats(floats_, on_disk_), timeout_s,
                                        /*device=*/nullptr, kTierPage);
  file_ = std::make_unique<DiskTierFile>(path, file_bytes, floats_.size());
}

OffloadedParams::~OffloadedParams() = default;

void OffloadedParams::check_offloaded(int l, const char* what) const {
  ASTERIA_ASSERT(l >= 0 && l < num_layers() && on_disk_[l], what, " of layer ", l, ", which is not on the disk tier");
}

float* OffloadedParams::load(int l) {
  check_offloaded(l, "load");
  float* buffer = slots_->acquire(l, names_[l]);
  file_->read(l, names_[l] + " (parameters)", offset_[l], buffer, floats_[l] * sizeof(float));
  traffic_.read += floats_[l] * sizeof(float);
  return buffer;
}

void OffloadedParams::release(int l) {
  check_offloaded(l, "release");
  slots_->release(l);
}

void OffloadedParams::store(int l) {
  check_offloaded(l, "store");
  float* buffer = slots_->held_by(l);
  ASTERIA_ASSERT(buffer, "store of ", names_[l], ", whose parameters are not in memory");
  if (file_->write(l, names_[l] + " (parameters)", offset_[l], buffer, floats_[l] * sizeof(float)))
    traffic_.written += floats_[l] * sizeof(float);
  slots_->release(l);
}

void OffloadedParams::copy_out(int l, float* dst) {
  if (!on_disk_[l]) {
    std::memcpy(dst, resident_[l].data(), floats_[l] * sizeof(float));
    return;
  }
  if (const float* in_flight = held(l)) {
    std::memcpy(dst, in_flight, floats_[l] * sizeof(float));
    return;
  }
  std::memcpy(dst, load(l), floats_[l] * sizeof(float));
  release(l);
}

void OffloadedParams::copy_in(int l, const float* src) {
  if (!on_disk_[l]) {
    std::memcpy(resident_[l].data(), src, floats_[l] * sizeof(float));
    return;
  }
  ASTERIA_ASSERT(!held(l), "copy_in of ", names_[l], " while it is in flight");
  float* buffer = slots_->acquire(l, names_[l]);
  std::memcpy(buffer, src, floats_[l] * sizeof(float));
  store(l);
}

OffloadedParams::Traffic OffloadedParams::take_traffic() {
  const Traffic t = traffic_;
  traffic_ = Traffic{};
  return t;
}

}  // namespace asteria
