#include "runtime/tier_manager.hpp"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <optional>

#include "core/error.hpp"
#include "core/memory_limits.hpp"

namespace asteria {

TierManager::TierManager(TierLayout layout, Optimizer& opt, const std::string& disk_file, Backend& backend)
    : layout_(std::move(layout)),
      backend_(backend),
      device_is_host_(backend.device_memory_is_host()),
      stream_(device_is_host_ ? nullptr : backend.create_stream(StreamPriority::Low)),
      device_(backend, layout_.device_home_bytes + layout_.device_cache_bytes, MemoryKind::Device),
      host_(backend, layout_.host_bytes, MemoryKind::PinnedHost),
      planner_(layout_) {
  tensors_.resize(layout_.states.size());
  for (int l = 0; l < layout_.num_layers(); ++l) {
    std::vector<StateTensor*> states = opt.layer_states(l);
    const std::vector<int>& ids = layout_.by_layer[l];
    ASTERIA_ASSERT(states.size() == ids.size(), "layer ", l, ": the optimizer has ", states.size(),
                   " state tensors, the tier layout ", ids.size());
    for (size_t k = 0; k < ids.size(); ++k) {
      ASTERIA_ASSERT(states[k]->spec() == layout_.states[ids[k]].spec, "layer ", l, ": state '", states[k]->spec().name,
                     "' differs from the tier layout's '", layout_.states[ids[k]].spec.name, "'");
      tensors_[ids[k]] = states[k];
    }
  }
  bind_homes();
  if (layout_.disk_bytes > 0) {
    disk_ = std::make_unique<DiskTierFile>(disk_file, layout_.disk_bytes, layout_.states.size());
    size_t largest = 0;
    for (const TierState& s : layout_.states)
      if (s.home == Tier::Disk) largest = std::max(largest, page_round(s.spec.bytes()));
    bounce_ = BackendBuffer(backend_, largest, MemoryKind::PinnedHost);
  }
}

void TierManager::bind_homes() {
  units_of_.assign(layout_.states.size(), {});
  missing_.reset(new std::atomic<int>[layout_.num_units()]);
  for (int u = 0; u < layout_.num_units(); ++u) {
    int missing = 0;
    for (int id : layout_.units[u].states) {
      units_of_[id].push_back(u);
      missing += layout_.states[id].home != Tier::Device;
    }
    missing_[u] = missing;
  }
  for (size_t id = 0; id < layout_.states.size(); ++id) {
    const TierState& s = layout_.states[id];
    tensors_[id]->bind(s.home == Tier::Device ? reinterpret_cast<float*>(device_at(s.home_offset)) : nullptr);
  }
  device_used_ = device_peak_ = layout_.device_home_bytes;
}

bool TierManager::layer_resident(int layer) const {
  for (size_t k = 0; k < layout_.parts[layer].size(); ++k)
    if (missing_[layout_.first_unit[layer] + static_cast<int>(k)].load() != 0) return false;
  return true;
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
  ex.add_residency_check([this](const Op& op, const StateRef& ref) {
    if (ref.kind != StateKind::OptimState || ref.layer < 0) return true;
    if (op.blocks.whole()) return layer_resident(ref.layer);
    return missing_[layout_.unit_of(ref.layer, op.blocks.first)].load() == 0;
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
      for (int u : units_of_[m.state]) --missing_[u];
    } else {
      ASTERIA_ASSERT(t.bound() && reinterpret_cast<uint8_t*>(t.data()) == dev, "state '", s.spec.name,
                     "' is evicted from where it is not");
      for (int u : units_of_[m.state]) ++missing_[u];
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

void TierManager::evict_visitors() {
  std::vector<TierMove> evictions;
  for (size_t id = 0; id < tensors_.size(); ++id)
    if (layout_.states[id].home != Tier::Device && tensors_[id]->bound())
      evictions.push_back({TierMove::Kind::Evict, static_cast<int>(id),
                           static_cast<size_t>(reinterpret_cast<uint8_t*>(tensors_[id]->data()) - device_.data())});
  run_moves(evictions);
}

std::string TierManager::relayout(TierLayout next, const std::string& disk_file, const std::string& spill_file) {
  ASTERIA_ASSERT(next.states.size() == layout_.states.size(), "relayout: other states");
  for (size_t id = 0; id < next.states.size(); ++id)
    ASTERIA_ASSERT(next.states[id].spec == layout_.states[id].spec && next.states[id].layer == layout_.states[id].layer,
                   "relayout: state ", id, " differs");
  // The states in memory go to the spill file (a slot each, in id order); those on the disk
  // tier stay in its file until they are read into their new home.
  size_t largest = 0, spill_bytes = 0;
  std::vector<size_t> spill_at(layout_.states.size(), 0);
  for (size_t id = 0; id < layout_.states.size(); ++id) {
    const size_t bytes = layout_.states[id].spec.bytes();
    largest = std::max(largest, page_round(bytes));
    if (layout_.states[id].home == Tier::Disk) continue;
    spill_at[id] = spill_bytes;
    spill_bytes += disk_slot_bytes(bytes);
  }
  const std::string dir = std::filesystem::path(disk_file).parent_path().string();
  if (const std::optional<uint64_t> free = free_disk_bytes(dir); free && *free < spill_bytes + next.disk_bytes)
    return "the disk tier's directory " + dir + " has " + std::to_string(*free) + " bytes free, the spill and the new "
           "file need " + std::to_string(spill_bytes + next.disk_bytes);
  evict_visitors();   // every state at its home now
  // Pinned, page-aligned: direct I/O of states in device memory that is not host memory, and
  // the copies between the two disk files.
  BackendBuffer bounce(backend_, largest, MemoryKind::PinnedHost);
  std::unique_ptr<DiskTierFile> spill;
  if (spill_bytes > 0) try {
    spill = std::make_unique<DiskTierFile>(spill_file, spill_bytes, layout_.states.size());
    for (size_t id = 0; id < layout_.states.size(); ++id) {
      const TierState& s = layout_.states[id];
      const size_t bytes = s.spec.bytes();
      if (s.home == Tier::Disk || bytes == 0) continue;
      const uint8_t* src = s.home == Tier::Host ? host_.data() + s.home_offset : device_at(s.home_offset);
      if (s.home == Tier::Device && !device_is_host_) {
        device_copy(bounce.data(), src, bytes);
        src = bounce.data();
      }
      spill->write(static_cast<int>(id), s.spec.name, spill_at[id], src, bytes);
    }
  } catch (const Error& e) {   // a full disk: nothing freed yet, every state at its home
    planner_.reset();
    return e.what();
  }
  // The point of no return: the old arenas go before the new ones are taken.
  const TierLayout old = std::move(layout_);
  std::unique_ptr<DiskTierFile> old_disk = std::move(disk_);
  for (StateTensor* t : tensors_) t->bind(nullptr);
  device_ = BackendBuffer();
  host_ = BackendBuffer();
  bounce_ = BackendBuffer();
  layout_ = std::move(next);
  device_ = BackendBuffer(backend_, layout_.device_home_bytes + layout_.device_cache_bytes, MemoryKind::Device);
  host_ = BackendBuffer(backend_, layout_.host_bytes, MemoryKind::PinnedHost);
  if (layout_.disk_bytes > 0) disk_ = std::make_unique<DiskTierFile>(disk_file, layout_.disk_bytes, layout_.states.size());
  for (size_t id = 0; id < layout_.states.size(); ++id) {
    const TierState &from = old.states[id], &to = layout_.states[id];
    const size_t bytes = to.spec.bytes();
    if (bytes == 0) continue;
    // Read straight into the new home when the host can address it, else through the bounce.
    const bool direct = to.home == Tier::Host || (to.home == Tier::Device && device_is_host_);
    uint8_t* dst = !direct ? bounce.data() : to.home == Tier::Host ? host_.data() + to.home_offset : device_at(to.home_offset);
    const int i = static_cast<int>(id);
    if (from.home == Tier::Disk) old_disk->read(i, from.spec.name, from.home_offset, dst, bytes);
    else spill->read(i, from.spec.name, spill_at[id], dst, bytes);
    if (to.home == Tier::Device && !device_is_host_) device_copy(device_at(to.home_offset), dst, bytes);
    if (to.home == Tier::Disk) disk_->write(i, to.spec.name, to.home_offset, dst, bytes);
  }
  // The disk tier's bounce: as large as its largest state.
  size_t largest_on_disk = 0;
  for (const TierState& s : layout_.states)
    if (s.home == Tier::Disk) largest_on_disk = std::max(largest_on_disk, page_round(s.spec.bytes()));
  if (largest_on_disk > 0) bounce_ = BackendBuffer(backend_, largest_on_disk, MemoryKind::PinnedHost);
  bind_homes();
  planner_.reset();
  return "";
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
