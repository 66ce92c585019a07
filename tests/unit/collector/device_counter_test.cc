// DeviceCounter: raw GPU counter ticks -> unwrapped ns at the nominal rate;
// wraps, a counter going backwards, activity values either side of the
// newest read, and configurations or values it must refuse.
#include "collector/clock/device_counter.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>

namespace chronolink::collector {
namespace {

TEST(DeviceCounterTest, NanosecondCounterIsIdentity) {
  DeviceCounter c(1'000'000'000, 64);
  int64_t ns = 0;
  std::string why;
  ASSERT_TRUE(c.ExtendRead(1'700'000'000'123'456'789, &ns, &why)) << why;
  EXPECT_EQ(ns, 1'700'000'000'123'456'789);
}

TEST(DeviceCounterTest, ScalesAtNominalRateFloored) {
  int64_t ns = 0;
  std::string why;
  DeviceCounter hundred_mhz(100'000'000, 48);
  ASSERT_TRUE(hundred_mhz.ExtendRead(123, &ns, &why)) << why;
  EXPECT_EQ(ns, 1230);
  // 19.2 MHz: 52.083 ns per tick, floored; 192 ticks are exactly 10 us.
  DeviceCounter xtal(19'200'000, 32);
  ASSERT_TRUE(xtal.ExtendRead(1, &ns, &why)) << why;
  EXPECT_EQ(ns, 52);
  ASSERT_TRUE(xtal.ExtendRead(192, &ns, &why)) << why;
  EXPECT_EQ(ns, 10'000);
}

TEST(DeviceCounterTest, UnwrapsAcrossTheCounterWidth) {
  DeviceCounter c(1'000'000'000, 8);  // wraps every 256 ns
  int64_t ns = 0;
  int64_t previous = -1;
  std::string why;
  uint64_t raw = 200;
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(c.ExtendRead(raw, &ns, &why)) << why;
    EXPECT_EQ(ns, 200 + 100 * i);
    EXPECT_GT(ns, previous);
    previous = ns;
    raw = (raw + 100) % 256;
  }
  EXPECT_EQ(c.wraps(), 8u);  // 200 .. 2100 crosses 256, 512, ..., 2048
}

TEST(DeviceCounterTest, ThirtyTwoBitCounterWrapsAtItsWidth) {
  DeviceCounter c(100'000'000, 32);
  int64_t ns = 0;
  std::string why;
  ASSERT_TRUE(c.ExtendRead(0xFFFF'FFF0u, &ns, &why)) << why;
  const int64_t before = ns;
  ASSERT_TRUE(c.ExtendRead(0x10, &ns, &why)) << why;
  EXPECT_EQ(ns - before, 0x20 * 10);
  EXPECT_EQ(c.wraps(), 1u);
}

TEST(DeviceCounterTest, BackwardsIsRefusedAndStateUnchanged) {
  DeviceCounter c(1'000'000'000, 32);
  int64_t ns = 0;
  std::string why;
  ASSERT_TRUE(c.ExtendRead(1000, &ns, &why)) << why;
  ns = -7;
  EXPECT_FALSE(c.ExtendRead(900, &ns, &why));
  EXPECT_NE(why.find("backwards by 100 ticks"), std::string::npos) << why;
  EXPECT_EQ(ns, -7);  // output untouched
  // The refused value changed nothing: the next read continues from 1000.
  ASSERT_TRUE(c.ExtendRead(1100, &ns, &why)) << why;
  EXPECT_EQ(ns, 1100);
  EXPECT_EQ(c.wraps(), 0u);
}

TEST(DeviceCounterTest, ValueWiderThanTheCounterIsRefused) {
  DeviceCounter c(1'000'000'000, 32);
  int64_t ns = 0;
  std::string why;
  EXPECT_FALSE(c.ExtendRead(uint64_t{1} << 32, &ns, &why));
  EXPECT_NE(why.find("does not fit in 32 bits"), std::string::npos) << why;
  ASSERT_TRUE(c.ExtendRead(5, &ns, &why));
  EXPECT_FALSE(c.ExtendNear(uint64_t{1} << 40, &ns, &why));
}

TEST(DeviceCounterTest, OverflowOfNanosecondsIsRefused) {
  DeviceCounter c(1'000'000'000, 64);
  int64_t ns = 0;
  std::string why;
  EXPECT_FALSE(c.ExtendRead(std::numeric_limits<uint64_t>::max() - 5, &ns, &why));
  EXPECT_NE(why.find("does not fit in 64 bits"), std::string::npos) << why;
  // A value near the end of int64 converts; one wrap later no longer does.
  const uint64_t near_end = static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) - 10;
  ASSERT_TRUE(c.ExtendRead(near_end, &ns, &why)) << why;
  EXPECT_FALSE(c.ExtendRead(near_end + 100, &ns, &why));
  ASSERT_TRUE(c.ExtendRead(near_end + 5, &ns, &why)) << why;
  EXPECT_EQ(ns, std::numeric_limits<int64_t>::max() - 5);
}

TEST(DeviceCounterTest, InvalidConfigurationRefusesEveryValue) {
  int64_t ns = 0;
  std::string why;
  DeviceCounter zero_hz(0, 32);
  EXPECT_FALSE(zero_hz.ExtendRead(1, &ns, &why));
  EXPECT_NE(why.find("0 Hz"), std::string::npos) << why;
  DeviceCounter narrow(1'000, 7);
  EXPECT_FALSE(narrow.ExtendRead(1, &ns, &why));
  EXPECT_NE(why.find("8..64"), std::string::npos) << why;
  DeviceCounter wide(1'000, 65);
  EXPECT_FALSE(wide.ExtendNear(1, &ns, &why));
}

TEST(DeviceCounterTest, ExtendNearPlacesActivityEitherSideOfTheNewestRead) {
  DeviceCounter c(1'000'000'000, 32);
  int64_t ns = 0;
  std::string why;
  EXPECT_FALSE(c.ExtendNear(10, &ns, &why));
  EXPECT_NE(why.find("no read yet"), std::string::npos) << why;

  ASSERT_TRUE(c.ExtendRead(0xFFFF'FF00u, &ns, &why));
  ASSERT_TRUE(c.ExtendRead(0x100, &ns, &why));  // one wrap
  const int64_t newest = ns;
  ASSERT_TRUE(c.ExtendNear(0x0F0, &ns, &why)) << why;
  EXPECT_EQ(ns, newest - 0x10);
  ASSERT_TRUE(c.ExtendNear(0x110, &ns, &why)) << why;
  EXPECT_EQ(ns, newest + 0x10);
  // Before the wrap the newest read went through.
  ASSERT_TRUE(c.ExtendNear(0xFFFF'FFF0u, &ns, &why)) << why;
  EXPECT_EQ(ns, newest - 0x110);
  // ExtendNear changes nothing.
  EXPECT_EQ(c.wraps(), 1u);
  ASSERT_TRUE(c.ExtendRead(0x101, &ns, &why));
  EXPECT_EQ(ns, newest + 1);
}

TEST(DeviceCounterTest, ActivityBeforeTheFirstWrapIsNegativeAndFloored) {
  DeviceCounter c(3, 8);  // 3 Hz: 333.3 ms per tick
  int64_t ns = 0;
  std::string why;
  ASSERT_TRUE(c.ExtendRead(1, &ns, &why));
  EXPECT_EQ(ns, 333'333'333);
  ASSERT_TRUE(c.ExtendNear(255, &ns, &why)) << why;  // two ticks earlier: tick -1
  EXPECT_EQ(ns, -333'333'334);                       // floor, not towards zero
}

}  // namespace
}  // namespace chronolink::collector
