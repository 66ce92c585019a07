#include "clock/clock_step_detector.h"

#include <gtest/gtest.h>

namespace chronolink {
namespace {

constexpr int64_t kReal = 1'790'000'000'000'000'000LL;

TEST(ClockStepDetector, SeesAStepOfRealtimeAgainstMonotonic) {
  ClockStepDetector d(1'000'000);
  EXPECT_FALSE(d.Update(100, kReal + 100, 110));
  EXPECT_FALSE(d.Update(1'000'100, kReal + 1'000'100, 1'000'120));  // both advanced 1 ms
  EXPECT_TRUE(d.Update(2'000'000, kReal + 2'000'000 + 5'000'000, 2'000'020));  // +5 ms step
  EXPECT_FALSE(d.Update(3'000'000, kReal + 3'000'000 + 5'000'000, 3'000'020));
  EXPECT_TRUE(d.Update(4'000'000, kReal + 4'000'000 - 2'000'000, 4'000'020));  // backwards
}

TEST(ClockStepDetector, IgnoresReadsInterruptedByPreemption) {
  ClockStepDetector d(1'000'000);
  EXPECT_FALSE(d.Update(0, kReal, 10));
  // Preempted for 3 ms between the realtime read and the second monotonic read.
  EXPECT_FALSE(d.Update(1'000'000, kReal + 1'000'000, 4'000'000));
  EXPECT_FALSE(d.Update(5'000'000, kReal + 5'000'000, 5'000'010));
}

// The default sees a 1 ms step, forwards and back, between reads up to a
// second apart, and not a clock slewed at NTP's 500 ppm limit.
TEST(ClockStepDetector, SeesAOneMillisecondStepButNotSlewing) {
  ClockStepDetector d;
  constexpr int64_t kS = 1'000'000'000;
  EXPECT_FALSE(d.Update(0, kReal, 10));
  EXPECT_FALSE(d.Update(kS, kReal + kS + 500'000, kS + 10));  // 500 ppm over 1 s
  EXPECT_TRUE(d.Update(2 * kS, kReal + 2 * kS + 500'000 + 1'000'000, 2 * kS + 10));
  EXPECT_EQ(d.last_step_ns(), 1'000'000);
  EXPECT_TRUE(d.Update(3 * kS, kReal + 3 * kS + 500'000, 3 * kS + 10));
  EXPECT_EQ(d.last_step_ns(), -1'000'000);
  EXPECT_FALSE(d.Update(3 * kS + 100'000'000, kReal + 3 * kS + 100'000'000 + 500'000, 3 * kS + 100'000'010));
  EXPECT_EQ(d.last_step_ns(), 0);
}

}  // namespace
}  // namespace chronolink
