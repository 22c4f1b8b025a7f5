#include "runtime/tier_manager.hpp"

#include <algorithm>
#include <cstring>

#include "core/error.hpp"

namespace asteria {

TierManager::TierManager(TierLayout layout, Optimizer& opt, const std::string& disk_file, Backend& backend)
    : layout_(std::move(layout)),
      backend_(backend),
      device_is_host_(backend.device_memory_is_host()),
      stream_(device_is_host_ ? nullptr : backend.create_stream(StreamPriority::Low)),
      device_(backend, layout_.device_home_bytes + layout_.device_cache_bytes, MemoryKind::Device),
      host_(backend, layout_.host_bytes, MemoryKind::PinnedHost),
      planner_(layout_),
      missing_(new std::atomic<int>[layout_.num_layers()]) {
  tensors_.resize(layout_.states.size());
  for (int l = 0; l < layout_.num_layers(); ++l) {
    std::vector<StateTensor*> states = opt.layer_states(l);
    const std::vector<int>& ids = layout_.by_layer[l];
    ASTERIA_ASSERT(states.size() == ids.size(), "layer ", l, ": the optimizer has ", states.size(),
                   " state tensors, the tier layout ", ids.size());
    int missing = 0;
    for (size_t k = 0; k < ids.size(); ++k) {
      const TierState& s = layout_.states[ids[k]];
      ASTERIA_ASSERT(states[k]->spec() == s.spec, "layer ", l, ": state '", states[k]->spec().name,
                     "' differs from the tier layout's '", s.spec.name, "'");
      tensors_[ids[k]] = states[k];
      if (s.home == Tier::Device) {
        states[k]->bind(reinterpret_cast<float*>(device_at(s.home_offset)));
      } else {
        states[k]->bind(nullptr);
        ++missing;
      }
    }
    missing_[l] = missing;
  }
  device_used_ = device_peak_ = layout_.device_home_bytes;
  if (layout_.disk_bytes > 0) {
    disk_ = std::make_unique<DiskTierFile>(disk_file, layout_.disk_bytes, layout_.states.size());
    size_t largest = 0;
    for (const TierState& s : layout_.states)
      if (s.home == Tier::Disk) largest = std::max(largest, page_round(s.spec.bytes()));
    bounce_ = BackendBuffer(backend_, largest, MemoryKind::PinnedHost);
  }
}

void TierManager::device_copy(void* dst, const void* src, size_t bytes) {
  if (device_is_host_) {
    std::memcpy(dst, src, bytes);
    return;
  }
  backend_.copy(dst, src, bytes, *stream_);
  stream_->synchronize();
}

void TierManager::disk_to_device(int id, uint8_t* dev) {
  const TierState& s = layout_.states[id];
  if (device_is_host_) {
    disk_->read(id, s.spec.name, s.home_offset, dev, s.spec.bytes());
  } else {
    disk_->read(id, s.spec.name, s.home_offset, bounce_.data(), s.spec.bytes());
    device_copy(dev, bounce_.data(), s.spec.bytes());
  }
}

bool TierManager::device_to_disk(int id, const uint8_t* dev) {
  const TierState& s = layout_.states[id];
  if (device_is_host_) return disk_->write(id, s.spec.name, s.home_offset, dev, s.spec.bytes());
  // The bounce's tail past the state stays as it is: the disk tier checksums `bytes` only.
  device_copy(bounce_.data(), dev, s.spec.bytes());
  return disk_->write(id, s.spec.name, s.home_offset, bounce_.data(), s.spec.bytes());
}

void TierManager::bind(Executor& ex) {
  auto replay = [this](const Op& op) { run_moves(planner_.moves(op.tag)); };
  ex.bind(OpKind::TierEvict, replay);
  ex.bind(OpKind::TierPrefetch, replay);
  ex.bind(OpKind::TierWait, [](const Op&) {});   // the executor waited for its dependency
  ex.set_residency_check([this](const Op& op, const StateRef& ref) {
    if (ref.kind != StateKind::OptimState || ref.layer < 0) return true;
    return layer_resident(ref.layer);
  });
}

void TierManager::run_moves(const std::vector<TierMove>& moves) {
  for (const TierMove& m : moves) {
    const TierState& s = layout_.states[m.state];
    StateTensor& t = *tensors_[m.state];
    uint8_t* dev = device_at(m.device_offset);
    const size_t bytes = s.spec.bytes();
    if (m.kind == TierMove::Kind::Load) {
      ASTERIA_ASSERT(!t.bound(), "state '", s.spec.name, "' is loaded twice");
      if (s.home == Tier::Host) {
        device_copy(dev, host_.data() + s.home_offset, bytes);
        moved_.host_to_device += bytes;
      } else {
        disk_to_device(m.state, dev);
        moved_.disk_to_device += bytes;
      }
      t.bind(reinterpret_cast<float*>(dev));
      device_used_ += s.slot;
      device_peak_ = std::max(device_peak_, device_used_);
      --missing_[s.layer];
    } else {
      ASTERIA_ASSERT(t.bound() && reinterpret_cast<uint8_t*>(t.data()) == dev, "state '", s.spec.name,
                     "' is evicted from where it is not");
      ++missing_[s.layer];
      t.bind(nullptr);
      if (s.home == Tier::Host) {
        device_copy(host_.data() + s.home_offset, dev, bytes);
        moved_.device_to_host += bytes;
      } else if (device_to_disk(m.state, dev)) {
        moved_.device_to_disk += bytes;
      }
      device_used_ -= s.slot;
    }
  }
}

void TierManager::copy_out(int id, float* dst) {
  const TierState& s = layout_.states[id];
  StateTensor& t = *tensors_[id];
  const size_t bytes = s.spec.bytes();
  if (bytes == 0) return;
  if (t.bound()) {
    device_copy(dst, t.data(), bytes);
  } else if (s.home == Tier::Host) {
    std::memcpy(dst, host_.data() + s.home_offset, bytes);
  } else {
    disk_->read(id, s.spec.name, s.home_offset, bounce_.data(), bytes);
    std::memcpy(dst, bounce_.data(), bytes);
  }
}

const float* TierManager::memory_of(int id) {
  const TierState& s = layout_.states[id];
  StateTensor& t = *tensors_[id];
  if (t.bound()) return device_is_host_ ? t.data() : nullptr;
  if (s.home == Tier::Host) return reinterpret_cast<const float*>(host_.data() + s.home_offset);
  return nullptr;
}

void TierManager::copy_in(int id, const float* src) {
  const TierState& s = layout_.states[id];
  StateTensor& t = *tensors_[id];
  const size_t bytes = s.spec.bytes();
  if (bytes == 0) return;
  if (t.bound()) {
    device_copy(t.data(), src, bytes);
  } else if (s.home == Tier::Host) {
    std::memcpy(host_.data() + s.home_offset, src, bytes);
  } else {
    std::memset(bounce_.data(), 0, page_round(bytes));
    std::memcpy(bounce_.data(), src, bytes);
    disk_->write(id, s.spec.name, s.home_offset, bounce_.data(), bytes);
  }
}

TierStats TierManager::take_stats() {
  size_t bound = 0;
  for (size_t id = 0; id < tensors_.size(); ++id)
    if (tensors_[id]->bound()) bound += layout_.states[id].slot;
  ASTERIA_ASSERT(bound == device_used_, "tier accounting: bound states hold ", bound, " device bytes, moves say ",
                 device_used_);
  ASTERIA_ASSERT(layout_.options.budget[0] == kUnbounded || device_peak_ <= layout_.options.budget[0],
                 "device tier over budget: ", device_peak_, " bytes");
  TierStats s = moved_;
  s.resident = {device_used_, layout_.host_bytes, layout_.disk_bytes};
  s.device_peak = device_peak_;
  moved_ = TierStats{};
  device_peak_ = device_used_;
  return s;
}

}  // namespace asteria
