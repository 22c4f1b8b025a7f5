// LayerSlots: the pool of whole-layer buffers a sharded step holds in flight. A full pool makes
// acquire() wait until another lane releases a buffer, and fail naming the layer when none
// frees in time (never hang).
#include "fsdp/layer_slots.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "core/error.hpp"

using asteria::Error;
using asteria::LayerSlots;

TEST(LayerSlots, BuffersAreDistinctHeldByTheirLayerAndReused) {
  LayerSlots slots("parameter", 2, 100, 5.0);
  EXPECT_EQ(slots.bytes(), 2 * 100 * sizeof(float));
  float* a = slots.acquire(3, "blocks.2");
  float* b = slots.acquire(5, "blocks.4");
  EXPECT_NE(a, b);
  EXPECT_EQ(std::abs(a - b), 100);
  EXPECT_EQ(slots.held_by(3), a);
  EXPECT_EQ(slots.held_by(5), b);
  EXPECT_EQ(slots.held_by(4), nullptr);
  slots.release(3);
  EXPECT_EQ(slots.held_by(3), nullptr);
  EXPECT_EQ(slots.acquire(7, "blocks.6"), a);   // the freed buffer
  EXPECT_EQ(slots.take_peak_held(), 2);
  slots.release(5);
  slots.release(7);
  EXPECT_EQ(slots.take_peak_held(), 2);   // the peak since the last call
  EXPECT_EQ(slots.take_peak_held(), 0);
}

TEST(LayerSlots, AFullPoolWaitsForAReleaseFromAnotherThread) {
  LayerSlots slots("gradient", 1, 10, 30.0);
  slots.acquire(1, "blocks.0");
  std::atomic<bool> released{false};
  std::thread other([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    released = true;
    slots.release(1);
  });
  const float* b = slots.acquire(2, "blocks.1");   // blocks until the other thread releases
  EXPECT_TRUE(released.load());
  EXPECT_EQ(slots.held_by(2), b);
  other.join();
}

TEST(LayerSlots, NoBufferFreedInTimeIsAnErrorNamingTheLayer) {
  LayerSlots slots("parameter", 1, 10, 0.2);
  slots.acquire(1, "blocks.0");
  const auto t0 = std::chrono::steady_clock::now();
  try {
    slots.acquire(2, "blocks.1");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("no parameter buffer freed within distributed.timeout_s"), std::string::npos) << m;
    EXPECT_NE(m.find("blocks.1"), std::string::npos) << m;
  }
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 5.0);
}
