// Placement of optimizer state in the device, host and disk tiers (runtime/tier_layout.hpp).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/error.hpp"
#include "runtime/tier_layout.hpp"

using namespace asteria;

namespace {

// `layers` layers, each with one hot state of `hot_pages` pages and one warm state of
// `warm_pages` pages.
std::vector<std::vector<StateSpec>> specs(int layers, size_t hot_pages, size_t warm_pages) {
  std::vector<std::vector<StateSpec>> s(layers);
  for (int l = 0; l < layers; ++l) {
    s[l].push_back({"l" + std::to_string(l) + ".hot", hot_pages * kTierPage / 4, StateClass::Hot, {}, {}});
    s[l].push_back({"l" + std::to_string(l) + ".warm", warm_pages * kTierPage / 4, StateClass::Warm, {}, {}});
  }
  return s;
}

TierOptions budgets(uint64_t device, uint64_t host, uint64_t disk, int distance = 1) {
  TierOptions o;
  o.budget = {device, host, disk};
  o.prefetch_distance = distance;
  return o;
}

std::string error_of(const std::vector<std::vector<StateSpec>>& s, const TierOptions& o) {
  try {
    place_states(s, o);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

size_t bytes_homed(const TierLayout& t, Tier tier) {
  size_t b = 0;
  for (const TierState& s : t.states)
    if (s.home == tier) b += s.slot;
  return b;
}

}  // namespace

TEST(TierLayout, EverythingOnTheDeviceWhenItFits) {
  TierLayout t = place_states(specs(4, 2, 3), budgets(kUnbounded, 0, 0));
  ASSERT_EQ(t.states.size(), 8u);
  for (const TierState& s : t.states) EXPECT_EQ(s.home, Tier::Device);
  EXPECT_EQ(t.device_home_bytes, 4 * 5 * kTierPage);
  EXPECT_FALSE(t.moves());
  // Exactly the bytes it needs is enough too.
  TierLayout exact = place_states(specs(4, 2, 3), budgets(4 * 5 * kTierPage, 0, 0));
  EXPECT_FALSE(exact.moves());
  EXPECT_EQ(bytes_homed(exact, Tier::Device), 4 * 5 * kTierPage);
}

TEST(TierLayout, SlotsArePageRoundedAndDisjoint) {
  std::vector<std::vector<StateSpec>> s = {{{"a", 1, StateClass::Hot, {}, {}}, {"b", 1025, StateClass::Warm, {}, {}}}};
  TierLayout t = place_states(s, {});
  ASSERT_EQ(t.states.size(), 2u);
  EXPECT_EQ(t.states[0].slot, kTierPage);
  EXPECT_EQ(t.states[1].slot, 2 * kTierPage);
  EXPECT_EQ(t.states[1].home_offset, kTierPage);
}

TEST(TierLayout, HotStatesOnTheDeviceWarmOnTheHostRestOnDisk) {
  // 6 layers of 2 hot + 3 warm pages = 30 pages. Distance 1: the cache holds 2 layers in flight.
  // Device 20 pages: all 12 hot pages homed, leaving 8 pages >= 2 layers of warm (6 pages).
  // Host 9 pages: 3 of the 6 warm states; the rest go to disk.
  TierLayout t = place_states(specs(6, 2, 3), budgets(20 * kTierPage, 9 * kTierPage, kUnbounded));
  for (const TierState& s : t.states) {
    if (s.spec.cls == StateClass::Hot) EXPECT_EQ(s.home, Tier::Device) << s.spec.name;
    else EXPECT_NE(s.home, Tier::Device) << s.spec.name;
  }
  EXPECT_EQ(bytes_homed(t, Tier::Host), 9 * kTierPage);
  EXPECT_EQ(bytes_homed(t, Tier::Disk), 9 * kTierPage);
  EXPECT_EQ(t.disk_bytes, 3 * disk_slot_bytes(3 * kTierPage));   // a header page per state
  EXPECT_EQ(t.device_home_bytes, 12 * kTierPage);
  EXPECT_EQ(t.device_cache_bytes, 8 * kTierPage);
  EXPECT_LE(t.device_home_bytes + t.device_cache_bytes, 20 * kTierPage);
  // The states used first by the optimizer (the last layers) get the host.
  EXPECT_EQ(t.states[t.by_layer[5][1]].home, Tier::Host);
  EXPECT_EQ(t.states[t.by_layer[0][1]].home, Tier::Disk);
  // The table by class agrees.
  EXPECT_EQ(t.by_class[static_cast<int>(StateClass::Hot)][0], 12 * kTierPage);
  EXPECT_EQ(t.by_class[static_cast<int>(StateClass::Warm)][1], 9 * kTierPage);
  EXPECT_EQ(t.by_class[static_cast<int>(StateClass::Warm)][2], 9 * kTierPage);
  const std::string d = t.describe();
  EXPECT_NE(d.find("warm"), std::string::npos);
  EXPECT_NE(d.find("disk"), std::string::npos);
}

TEST(TierLayout, HotStatesGiveWayToTheCacheOfTheLayersInFlight) {
  // Device 10 pages, distance 2: 3 layers of 5 pages in flight need 15 pages > 10: refused.
  // Distance 1 needs 10 pages when nothing is homed on the device: every state visits.
  EXPECT_NE(error_of(specs(6, 2, 3), budgets(10 * kTierPage, kUnbounded, kUnbounded, 2)).find("prefetch_distance"),
            std::string::npos);
  TierLayout t = place_states(specs(6, 2, 3), budgets(10 * kTierPage, kUnbounded, kUnbounded, 1));
  EXPECT_EQ(t.device_home_bytes, 0u);
  EXPECT_EQ(t.device_cache_bytes, 10 * kTierPage);
  EXPECT_EQ(bytes_homed(t, Tier::Host), 30 * kTierPage);
}

TEST(TierLayout, TooLargeForEveryTierSaysTheBytesEachTierNeeds) {
  const std::string e = error_of(specs(6, 2, 3), budgets(20 * kTierPage, 9 * kTierPage, 4 * kTierPage));
  ASSERT_FALSE(e.empty());
  // Disk would need 3 slots of (1 header + 3 data) pages; keeping it in memory needs 18 host pages.
  EXPECT_NE(e.find(std::to_string(3 * disk_slot_bytes(3 * kTierPage))), std::string::npos) << e;
  EXPECT_NE(e.find(std::to_string(18 * kTierPage)), std::string::npos) << e;
  EXPECT_NE(e.find("runtime.tiers.disk.bytes"), std::string::npos) << e;
  EXPECT_NE(e.find("runtime.tiers.host.bytes"), std::string::npos) << e;
  EXPECT_NE(e.find("device"), std::string::npos) << e;
  // The same with the disk big enough is accepted.
  EXPECT_NO_THROW(place_states(specs(6, 2, 3), budgets(20 * kTierPage, 9 * kTierPage, 12 * kTierPage)));
}

TEST(TierLayout, DeviceTooSmallForOneLayerIsRefused) {
  const std::string e = error_of(specs(3, 2, 3), budgets(4 * kTierPage, kUnbounded, kUnbounded, 0));
  EXPECT_NE(e.find("runtime.tiers.device.bytes"), std::string::npos) << e;
  EXPECT_NE(e.find(std::to_string(5 * kTierPage)), std::string::npos) << e;
}

namespace {

// `layers` layers of `blocks` preconditioner blocks: a layer-wide state of `wide_pages` pages
// (no shape, as the update compensation) and per block a hot factor and a warm basis of one
// page each, named "<block> / <tensor>" as the optimizers name them.
std::vector<std::vector<StateSpec>> block_specs(int layers, int blocks, size_t wide_pages) {
  std::vector<std::vector<StateSpec>> s(layers);
  const size_t page = kTierPage / 4;
  for (int l = 0; l < layers; ++l) {
    s[l].push_back({"l" + std::to_string(l) + ".compensation", wide_pages * page, StateClass::Hot, {}, {}});
    for (int b = 0; b < blocks; ++b) {
      const std::string block = "l" + std::to_string(l) + ".b" + std::to_string(b);
      s[l].push_back({block + " / L", page, StateClass::Hot, {32, 32}, {}});
      s[l].push_back({block + " / QL", page, StateClass::Warm, {32, 32}, {}});
    }
  }
  return s;
}

}  // namespace

// A device budget below the whole layers in flight: the layers move in parts, the largest that
// fit (halving from half the most blocks a layer has, not below min_blocks_per_part), each part
// its layer's layer-wide states and its run of blocks, in the optimizer's order.
TEST(TierLayout, LayersTooLargeForTheCacheMoveInParts) {
  const auto s = block_specs(3, 8, 2);   // a layer: 2 + 8 * 2 = 18 pages
  EXPECT_EQ(tier_cache_need(s, 1), 36 * kTierPage);       // two whole layers
  EXPECT_EQ(tier_cache_need(s, 1, 4), 2 * 10 * kTierPage);   // two parts of 4 blocks, each with the wide state
  EXPECT_EQ(tier_cache_need(s, 1, 2), 2 * 6 * kTierPage);
  // Within one layer, consecutive parts share its wide state: counted once.
  const auto one = block_specs(1, 8, 2);
  EXPECT_EQ(tier_cache_need(one, 1, 2), (2 + 2 * 2 * 2) * kTierPage);

  TierOptions o = budgets(20 * kTierPage, 0, kUnbounded, 1);
  o.min_blocks_per_part = 2;
  const TierLayout t = place_states(s, o);
  EXPECT_EQ(t.blocks_per_part, 4);   // 20 pages hold two parts of 4 blocks (10 pages each), not of 8
  ASSERT_EQ(t.num_units(), 6);
  const std::vector<int> layer_of_use = {2, 2, 1, 1, 0, 0};
  for (int u = 0; u < 6; ++u) {
    const TierUnit& unit = t.units[u];
    EXPECT_EQ(unit.layer, layer_of_use[u]);
    EXPECT_EQ(unit.blocks, (u % 2 == 0 ? BlockRange{0, 4} : BlockRange{4, -1})) << u;
    ASSERT_EQ(unit.states.size(), 9u);
    EXPECT_EQ(unit.states[0], t.by_layer[unit.layer][0]);   // the layer-wide state first
    EXPECT_EQ(t.states[unit.states[1]].spec.name, "l" + std::to_string(unit.layer) + ".b" +
                                                      std::to_string(unit.blocks.first) + " / L");
    EXPECT_EQ(t.unit_of(unit.layer, unit.blocks.first), u);
  }
  EXPECT_EQ(t.parts[1], (std::vector<BlockRange>{{0, 4}, {4, -1}}));
  EXPECT_EQ(t.cache_need, 20 * kTierPage);
  EXPECT_EQ(t.device_cache_bytes, 20 * kTierPage);   // no room left to home hot state

  // Not below the fewest blocks a part may have: the message names the parts.
  o.budget[0] = 10 * kTierPage;
  o.min_blocks_per_part = 4;
  const std::string e = error_of(s, o);
  EXPECT_NE(e.find("part(s) of layers (of 4 blocks, the fewest)"), std::string::npos) << e;
  // With room for whole layers, whole layers (as before parts existed).
  o.budget[0] = 40 * kTierPage;
  EXPECT_EQ(place_states(s, o).blocks_per_part, 0);
}

// The update compensation's bands (no shape, StateSpec::blocks naming the blocks that use them)
// move with their blocks' parts only: a part brings the layer-wide state, its blocks' states and
// the bands of its blocks; a band shared by two parts is counted once while both are in flight.
TEST(TierLayout, CompensationBandsMoveWithTheirBlocksParts) {
  const size_t page = kTierPage / 4;
  std::vector<std::vector<StateSpec>> s(2);
  for (int l = 0; l < 2; ++l) {
    const std::string p = "l" + std::to_string(l);
    s[l].push_back({p + ".norm moments", page, StateClass::Hot, {}, {}});
    // Bands: blocks 0, 1, 2 each their own (a tall matrix's rows); blocks 3-5 share one (a wide one's).
    for (BlockRange r : {BlockRange{0, 1}, BlockRange{1, 2}, BlockRange{2, 3}, BlockRange{3, 6}})
      s[l].push_back({p + ".band " + std::to_string(r.first), (r.end - r.first) * 2 * page, StateClass::Hot, {}, r});
    for (int b = 0; b < 6; ++b) {
      const std::string block = p + ".b" + std::to_string(b);
      s[l].push_back({block + " / L", page, StateClass::Hot, {32, 32}, {}});
      s[l].push_back({block + " / QL", page, StateClass::Warm, {32, 32}, {}});
    }
  }
  // Parts of 3 blocks would need 25 pages in flight (the first two parts of a layer), of 2: 21.
  TierOptions o = budgets(24 * kTierPage, 0, kUnbounded, 1);
  o.min_blocks_per_part = 2;
  const TierLayout t = place_states(s, o);
  ASSERT_EQ(t.blocks_per_part, 2);
  ASSERT_EQ(t.num_units(), 6);
  auto names = [&](int u) {
    std::vector<std::string> out;
    for (int id : t.units[u].states) out.push_back(t.states[id].spec.name);
    return out;
  };
  EXPECT_EQ(names(0), (std::vector<std::string>{"l1.norm moments", "l1.band 0", "l1.band 1", "l1.b0 / L", "l1.b0 / QL",
                                                "l1.b1 / L", "l1.b1 / QL"}));
  EXPECT_EQ(names(1), (std::vector<std::string>{"l1.norm moments", "l1.band 2", "l1.band 3", "l1.b2 / L", "l1.b2 / QL",
                                                "l1.b3 / L", "l1.b3 / QL"}));
  EXPECT_EQ(names(2), (std::vector<std::string>{"l1.norm moments", "l1.band 3", "l1.b4 / L", "l1.b4 / QL", "l1.b5 / L",
                                                "l1.b5 / QL"}));
  // The most of two consecutive units: units 0 and 1, 1 + 2 + 2 + 2 + 6 (each band once) + 8
  // block pages = 21 pages (units 1 and 2 share band 3: 1 + 2 + 6 + 8 = 17).
  EXPECT_EQ(t.cache_need, 21 * kTierPage);
  // As one layer-wide compensation (the layer's 18 pages in every part) the parts would need more.
  std::vector<std::vector<StateSpec>> wide = s;
  for (auto& layer : wide) {
    layer.erase(layer.begin() + 1, layer.begin() + 5);
    layer.insert(layer.begin(), StateSpec{"compensation", 18 * page, StateClass::Hot, {}, {}});
  }
  EXPECT_GT(tier_cache_need(wide, 1, 2), t.cache_need + 18 * kTierPage);
}
