#include "runtime/tier_layout.hpp"

#include <algorithm>
#include <cstdio>
#include <sstream>

#include "core/error.hpp"

namespace asteria {

const char* to_string(Tier t) {
  switch (t) {
    case Tier::Device: return "device";
    case Tier::Host: return "host";
    case Tier::Disk: return "disk";
  }
  return "?";
}

namespace {

std::string bytes_text(uint64_t b) {
  if (b == kUnbounded) return "unbounded";
  char s[64];
  std::snprintf(s, sizeof s, "%llu bytes (%.1f MiB)", static_cast<unsigned long long>(b), b / 1048576.0);
  return s;
}

// A layer's states as the optimizer steps them: the layer-wide ones (no block shape: the 1-D
// parameters' moments, an update compensation of the whole layer), each preconditioner block's
// (consecutive states named "<block> / <tensor>"), in layer order, and the states without a shape
// that serve some blocks only (the update compensation's bands, StateSpec::blocks).
struct LayerStates {
  std::vector<int> wide;
  std::vector<std::vector<int>> blocks;
  std::vector<int> banded;
};

// Every state with its slot, homed on the host until placed.
std::vector<LayerStates> list_states(const std::vector<std::vector<StateSpec>>& specs, TierLayout& t) {
  const int L = static_cast<int>(specs.size());
  t.by_layer.resize(L);
  std::vector<LayerStates> layers(L);
  for (int l = 0; l < L; ++l) {
    std::string block;
    for (const StateSpec& s : specs[l]) {
      if (s.count == 0) continue;
      TierState st;
      st.spec = s;
      st.layer = l;
      st.slot = page_round(s.bytes());
      st.home = Tier::Host;
      const int id = static_cast<int>(t.states.size());
      t.by_layer[l].push_back(id);
      t.states.push_back(std::move(st));
      if (s.shape.empty()) {
        (s.blocks.whole() ? layers[l].wide : layers[l].banded).push_back(id);
        continue;
      }
      const std::string name = s.name.substr(0, s.name.rfind(" / "));
      if (layers[l].blocks.empty() || name != block) layers[l].blocks.emplace_back();
      layers[l].blocks.back().push_back(id);
      block = name;
    }
  }
  return layers;
}

// The units of the optimizer's order for parts of at most `per_part` blocks (0: whole layers).
void make_units(TierLayout& t, const std::vector<LayerStates>& layers, int per_part) {
  const int L = t.num_layers();
  t.blocks_per_part = per_part;
  t.fresh_each_step = per_part > 0;
  t.units.clear();
  t.parts.assign(L, {});
  t.first_unit.assign(L, 0);
  for (int u = 0; u < L; ++u) {
    const int l = layer_at_use(L, u);
    const int nb = static_cast<int>(layers[l].blocks.size());
    t.first_unit[l] = t.num_units();
    if (per_part == 0 || nb <= per_part) {
      t.units.push_back({l, BlockRange{}, t.by_layer[l]});
      t.parts[l].push_back(BlockRange{});
      continue;
    }
    for (int first = 0; first < nb; first += per_part) {
      TierUnit unit{l, BlockRange{first, std::min(nb, first + per_part)}, layers[l].wide};
      for (int id : layers[l].banded) {   // a band some of whose blocks are the part's
        const BlockRange served = t.states[id].spec.blocks;
        if (served.first < unit.blocks.end && served.end_in(nb) > unit.blocks.first) unit.states.push_back(id);
      }
      for (int b = unit.blocks.first; b < unit.blocks.end; ++b)
        unit.states.insert(unit.states.end(), layers[l].blocks[b].begin(), layers[l].blocks[b].end());
      if (unit.blocks.end == nb) unit.blocks.end = -1;   // the last part: to the layer's end
      t.parts[l].push_back(unit.blocks);
      t.units.push_back(std::move(unit));
    }
  }
}

// Bytes the device cache must hold: the most, over prefetch_distance + 1 consecutive units of
// the (cyclic) optimizer order, of the slots of their states that visit (each state once: a
// layer's parts share its layer-wide states).
size_t cache_need(const TierLayout& t, const std::vector<char>& visiting) {
  const int U = t.num_units();
  const int window = std::min(U, t.options.prefetch_distance + 1);
  std::vector<int> seen(t.states.size(), -1);
  size_t need = 0;
  for (int start = 0; start < U; ++start) {
    size_t sum = 0;
    for (int k = 0; k < window; ++k)
      for (int id : t.units[(start + k) % U].states)
        if (visiting[id] && seen[id] != start) {
          seen[id] = start;
          sum += t.states[id].slot;
        }
    need = std::max(need, sum);
  }
  return need;
}

// The part sizes to try, largest first: whole layers, then half the largest layer's blocks,
// halving, down to min_blocks_per_part.
std::vector<int> part_sizes(const std::vector<LayerStates>& layers, int min_blocks_per_part) {
  int most = 0;
  for (const LayerStates& l : layers) most = std::max(most, static_cast<int>(l.blocks.size()));
  std::vector<int> sizes = {0};
  const int least = std::max(1, min_blocks_per_part);
  for (int k = most / 2; k > least; k /= 2) sizes.push_back(k);
  if (most > least) sizes.push_back(least);
  return sizes;
}

}  // namespace

int TierLayout::unit_of(int layer, int first) const {
  const std::vector<BlockRange>& p = parts[static_cast<size_t>(layer)];
  for (size_t k = 0; k < p.size(); ++k)
    if (p[k].first == first) return first_unit[static_cast<size_t>(layer)] + static_cast<int>(k);
  ASTERIA_ASSERT(false, "layer ", layer, " has no part starting at block ", first);
  return -1;
}

size_t tier_cache_need(const std::vector<std::vector<StateSpec>>& specs, int prefetch_distance, int blocks_per_part) {
  TierLayout t;
  t.options.prefetch_distance = prefetch_distance;
  const std::vector<LayerStates> layers = list_states(specs, t);
  make_units(t, layers, blocks_per_part);
  return cache_need(t, std::vector<char>(t.states.size(), 1));
}

namespace {

// The states of some classes in the optimizer's order of use.
std::vector<int> in_order(const TierLayout& t, std::initializer_list<StateClass> classes) {
  const int L = static_cast<int>(t.by_layer.size());
  std::vector<int> ids;
  for (StateClass cls : classes)
    for (int u = 0; u < L; ++u)
      for (int id : t.by_layer[layer_at_use(L, u)])
        if (t.states[id].spec.cls == cls) ids.push_back(id);
  return ids;
}

void home_on_device(TierLayout& t, TierState& s) {
  s.home = Tier::Device;
  s.home_offset = t.device_home_bytes;
  t.device_home_bytes += s.slot;
}

// Device: hot states (written every step, so pinning them saves the most moves), while the
// cache for the states that visit still fits.
void home_hot_states(TierLayout& t, std::vector<char>& visiting, uint64_t device_budget, size_t cache_slack) {
  for (int id : in_order(t, {StateClass::Hot})) {
    TierState& s = t.states[id];
    visiting[id] = 0;
    if (t.device_home_bytes + s.slot + cache_need(t, visiting) + cache_slack <= device_budget) {
      home_on_device(t, s);
    } else {
      visiting[id] = 1;
    }
  }
}

// Host, then disk: warm states first (on disk they cost a read per step, hot ones a read and a
// write), then hot ones, then cold. Refuses, with the bytes, a layout the disk budget cannot hold.
void home_the_rest(TierLayout& t, size_t total) {
  const uint64_t host_budget = t.options.budget[1], disk_budget = t.options.budget[2];
  size_t disk_need = 0;
  std::string first_on_disk;
  for (int id : in_order(t, {StateClass::Warm, StateClass::Hot, StateClass::Cold})) {
    TierState& s = t.states[id];
    if (s.home == Tier::Device) continue;
    if (host_budget == kUnbounded || t.host_bytes + s.slot <= host_budget) {
      s.home = Tier::Host;
      s.home_offset = t.host_bytes;
      t.host_bytes += s.slot;
    } else {
      s.home = Tier::Disk;
      s.home_offset = disk_need;
      disk_need += disk_slot_bytes(s.spec.bytes());
      if (first_on_disk.empty()) first_on_disk = s.spec.name;
    }
  }
  if (disk_budget != kUnbounded && disk_need > disk_budget) {
    size_t host_need = 0;
    for (const TierState& s : t.states)
      if (s.home != Tier::Device) host_need += s.slot;
    fail("the optimizer state does not fit the tier budgets: it needs ", bytes_text(total),
         " (in pages); at these budgets the device holds ", bytes_text(t.device_home_bytes), " + a ",
         bytes_text(t.device_cache_bytes), " cache, the host ", bytes_text(t.host_bytes),
         ", and the disk would need ", bytes_text(disk_need), " (runtime.tiers.disk.bytes is ",
         bytes_text(disk_budget), "; first state that fits no tier: '", first_on_disk,
         "'). Raise runtime.tiers.disk.bytes to at least ", disk_need,
         ", or runtime.tiers.host.bytes to at least ", host_need, " to keep it all in memory");
  }
  t.disk_bytes = disk_need;
}

}  // namespace

TierLayout place_states(const std::vector<std::vector<StateSpec>>& specs, const TierOptions& options,
                        size_t cache_slack) {
  ASTERIA_CHECK(options.prefetch_distance >= 0, "runtime.tiers.prefetch_distance must be >= 0");
  TierLayout t;
  t.options = options;
  const std::vector<LayerStates> layers = list_states(specs, t);
  std::vector<char> visiting(t.states.size(), 1);
  const uint64_t device_budget = options.budget[0];
  size_t total = 0;
  for (const TierState& s : t.states) total += s.slot;
  if (device_budget == kUnbounded || total <= device_budget) {
    // Everything lives on the device; nothing moves.
    make_units(t, layers, 0);
    t.cache_need = cache_need(t, visiting);
    for (TierState& s : t.states) {
      home_on_device(t, s);
      t.by_class[static_cast<int>(s.spec.cls)][0] += s.slot;
    }
    return t;
  }
  // Whole layers while the cache for those in flight fits; else the largest parts that do.
  size_t min_cache = 0;
  for (int per_part : part_sizes(layers, options.min_blocks_per_part)) {
    make_units(t, layers, per_part);
    t.cache_need = cache_need(t, visiting);
    min_cache = t.cache_need + cache_slack;
    if (min_cache <= device_budget) break;
  }
  if (min_cache > device_budget) {
    const int L = static_cast<int>(specs.size());
    fail("runtime.tiers.device.bytes is ", bytes_text(device_budget), ", but the optimizer state of ",
         std::min(t.num_units(), options.prefetch_distance + 1),
         t.blocks_per_part ? " part(s) of layers (of " + std::to_string(t.blocks_per_part) + " blocks, the fewest)"
                           : std::string(" layer(s)"),
         " in flight (runtime.tiers.prefetch_distance ", options.prefetch_distance, " + 1; ", L,
         " layers) needs ", bytes_text(min_cache), " of device memory",
         cache_slack ? " (with room for the cache's fragmentation)" : "",
         "; raise the device budget to at least that or lower the prefetch distance");
  }
  home_hot_states(t, visiting, device_budget, cache_slack);
  t.device_cache_bytes = std::min<size_t>(device_budget - t.device_home_bytes, total - t.device_home_bytes);
  home_the_rest(t, total);
  for (const TierState& s : t.states) t.by_class[static_cast<int>(s.spec.cls)][static_cast<int>(s.home)] += s.slot;
  return t;
}

std::string TierLayout::describe() const {
  std::ostringstream os;
  auto mib = [](double b) {
    char s[32];
    std::snprintf(s, sizeof s, "%10.1f MiB", b / 1048576.0);
    return std::string(s);
  };
  os << "optimizer state placement (runtime.tiers, prefetch distance " << options.prefetch_distance << "):\n";
  os << "  class " << "        device" << "          host" << "          disk\n";
  for (int c = 0; c < kNumStateClasses; ++c) {
    os << "  " << to_string(static_cast<StateClass>(c)) << std::string(6 - std::string(to_string(static_cast<StateClass>(c))).size(), ' ');
    for (int tier = 0; tier < kNumTiers; ++tier) os << "  " << mib(static_cast<double>(by_class[c][tier]));
    os << "\n";
  }
  const size_t used[kNumTiers] = {device_home_bytes + device_cache_bytes, host_bytes, disk_bytes};
  for (int tier = 0; tier < kNumTiers; ++tier) {
    const std::string label = std::string(to_string(static_cast<Tier>(tier))) + ":";
    os << "  " << label << std::string(8 - label.size(), ' ') << mib(static_cast<double>(used[tier]))
       << " of budget " << bytes_text(options.budget[tier]);
    if (tier == 0 && device_cache_bytes > 0)
      os << "; of it " << bytes_text(device_cache_bytes) << " is the cache for states homed below";
    if (tier == 2 && disk_bytes > 0) os << " (header page per state included)";
    os << "\n";
  }
  return os.str();
}

}  // namespace asteria
