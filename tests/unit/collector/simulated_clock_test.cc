// The simulated GPU clock model: the inverse is exact to 1 ns, the counter
// runs at its rate with its error and wander, wraps at its width, steps back
// when asked, and read delays replay from a seed.
#include "collector/device/simulated/simulated_clock.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>

namespace chronolink::collector {
namespace {

constexpr int64_t kOrigin = 1'780'000'000'000'000'000;  // a REALTIME instant in 2026
constexpr int64_t kSecond = 1'000'000'000;

SimulatedClockParams Drifting(uint64_t rate_hz) {
  SimulatedClockParams p;
  p.rate_hz = rate_hz;
  p.rate_error_ppm = 37.5;
  p.drift_ppm_per_s = 0.05;
  p.wander_period_s = 20;
  p.wander_phase_rad = 1.0;
  p.bits = 48;
  p.origin_true_ns = kOrigin;
  p.origin_ticks = 123'456'789;
  return p;
}

// For every sampled instant t: the inverse of the counter there is the first
// ns at which the counter reaches that value, no later than t.
void ExpectExactInverse(const SimulatedClock& clock, int samples) {
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<int64_t> offset(-1000 * kSecond, 1000 * kSecond);
  for (int i = 0; i < samples; ++i) {
    const int64_t t = kOrigin + offset(rng);
    const int64_t ticks = clock.TicksAt(t);
    int64_t back = 0;
    ASSERT_TRUE(clock.TrueNsOfTicks(ticks, 0, &back)) << t;
    EXPECT_LE(back, t);
    EXPECT_GE(clock.TicksAt(back), ticks);
    EXPECT_LT(clock.TicksAt(back - 1), ticks);
    EXPECT_EQ(clock.TicksAt(back), ticks);  // reached at t, so not skipped
  }
}

TEST(SimulatedClockTest, InverseIsExactToOneNanosecond) {
  ExpectExactInverse(SimulatedClock(Drifting(100'000'000)), 5000);  // 10 ns per tick
  ExpectExactInverse(SimulatedClock(Drifting(27'000'000)), 2000);   // not a whole ns per tick
  ExpectExactInverse(SimulatedClock(Drifting(1'000'000'000)), 2000);
}

TEST(SimulatedClockTest, InverseOfASkippedValueIsWhereTheCounterPassesIt) {
  const SimulatedClock clock(Drifting(3'000'000'000));  // 3 ticks per ns: values are skipped
  const int64_t t = kOrigin + 5 * kSecond;
  const int64_t ticks = clock.TicksAt(t) + 1;
  int64_t back = 0;
  ASSERT_TRUE(clock.TrueNsOfTicks(ticks, 0, &back));
  EXPECT_GE(clock.TicksAt(back), ticks);
  EXPECT_LT(clock.TicksAt(back - 1), ticks);
}

TEST(SimulatedClockTest, RunsAtItsRateWithErrorAndWander) {
  const SimulatedClock clock(Drifting(100'000'000));
  for (int64_t at : {0LL, 3LL, 7LL, 12LL}) {
    const int64_t t = kOrigin + at * kSecond;
    // 10 ms hold 1e6 ticks: the count tells the frequency error to 1e-6;
    // compare it with the model's own y at the midpoint.
    const int64_t span = 10'000'000;
    const double ticks = static_cast<double>(clock.TicksAt(t + span) - clock.TicksAt(t));
    const double measured = ticks / (1e-9 * span * 1e8) - 1.0;
    EXPECT_NEAR(measured, clock.FrequencyErrorAt(t + span / 2), 2e-6);  // one tick of 1e6
  }
  // The wander's peak slope is drift_ppm_per_s.
  const double slope =
      (clock.FrequencyErrorAt(kOrigin + kSecond / 100) - clock.FrequencyErrorAt(kOrigin)) / 0.01;
  EXPECT_LE(std::abs(slope), 0.05e-6 * 1.001);
  EXPECT_NEAR(clock.FrequencyErrorAt(kOrigin), 37.5e-6 + 0.05e-6 / (2 * 3.14159265 / 20) * std::sin(1.0),
              1e-10);
}

TEST(SimulatedClockTest, WithoutErrorItIsTheNominalRateExactly) {
  SimulatedClockParams p;
  p.rate_hz = 100'000'000;
  p.origin_true_ns = kOrigin;
  p.origin_ticks = 1000;
  const SimulatedClock clock(p);
  EXPECT_EQ(clock.TicksAt(kOrigin), 1000);
  EXPECT_EQ(clock.TicksAt(kOrigin + 9), 1000);
  EXPECT_EQ(clock.TicksAt(kOrigin + 10), 1001);
  EXPECT_EQ(clock.TicksAt(kOrigin - 1), 999);
  EXPECT_EQ(clock.TicksAt(kOrigin + 3600 * kSecond), 1000 + 3600LL * 100'000'000);
}

TEST(SimulatedClockTest, TheRawCounterWrapsAtItsWidth) {
  SimulatedClockParams p;
  p.rate_hz = 100'000'000;
  p.bits = 32;
  p.origin_true_ns = kOrigin;
  p.origin_ticks = (uint64_t{1} << 32) - 100'000'000;  // wraps one second after the origin
  const SimulatedClock clock(p);
  EXPECT_EQ(clock.wrap_mask(), 0xFFFF'FFFFu);
  EXPECT_EQ(clock.RawAt(kOrigin + kSecond - 10), 0xFFFF'FFFFu);
  EXPECT_EQ(clock.RawAt(kOrigin + kSecond), 0u);
  EXPECT_EQ(clock.RawAt(kOrigin + 2 * kSecond), 100'000'000u);
  EXPECT_EQ(clock.TicksAt(kOrigin + 2 * kSecond), (int64_t{1} << 32) + 100'000'000);  // unwrapped
  SimulatedClockParams wide = p;
  wide.bits = 64;
  EXPECT_EQ(SimulatedClock(wide).RawAt(kOrigin + 2 * kSecond), (uint64_t{1} << 32) + 100'000'000);
}

TEST(SimulatedClockTest, StepsBackwardsAtTheChosenInstant) {
  SimulatedClockParams p = Drifting(100'000'000);
  p.backwards_at_true_ns = kOrigin + 10 * kSecond;
  p.backwards_by_ticks = 50'000'000;  // half a second
  const SimulatedClock clock(p);
  const int64_t step = p.backwards_at_true_ns;
  EXPECT_EQ(clock.SegmentAt(step - 1), 0);
  EXPECT_EQ(clock.SegmentAt(step), 1);
  EXPECT_GT(clock.TicksAt(step - 1), clock.TicksAt(step) + 49'000'000);
  // A value the counter reads twice (before the step and after it) inverts
  // to each segment's own instant; half a second apart.
  const int64_t twice = clock.TicksAt(step - kSecond / 4);
  int64_t first = 0;
  int64_t second = 0;
  ASSERT_TRUE(clock.TrueNsOfTicks(twice, 0, &first));
  ASSERT_TRUE(clock.TrueNsOfTicks(twice, 1, &second));
  EXPECT_LE(first, step - kSecond / 4);
  EXPECT_NEAR(static_cast<double>(second - first), 0.5e9, 1e5);
  // A value the segment after the step starts above is not in it.
  int64_t none = 0;
  EXPECT_FALSE(clock.TrueNsOfTicks(clock.TicksAt(step) - 5, 1, &none));
  EXPECT_FALSE(clock.TrueNsOfTicks(twice, 2, &none));
  EXPECT_FALSE(SimulatedClock(Drifting(100'000'000)).TrueNsOfTicks(twice, 1, &none));  // no step
}

TEST(SimulatedClockTest, ReadDelaysStayInsideTheirLimitsAndReplayFromASeed) {
  SimulatedClockParams p;
  p.latency_ns = 300;
  p.jitter_ns = 1000;
  p.slow_read_prob = 0.1;
  p.slow_read_ns = 50'000;
  const SimulatedClock clock(p);
  std::mt19937_64 rng(11);
  std::mt19937_64 replay(11);
  int slow = 0;
  const int draws = 10'000;
  for (int i = 0; i < draws; ++i) {
    const SimulatedReadDelays d = clock.DrawReadDelays(&rng);
    const SimulatedReadDelays again = clock.DrawReadDelays(&replay);
    EXPECT_EQ(d.before_ns, again.before_ns);
    EXPECT_EQ(d.after_ns, again.after_ns);
    EXPECT_GE(d.before_ns, 150);
    EXPECT_GE(d.after_ns, 150);
    const int64_t total = d.before_ns + d.after_ns - (d.slow ? p.slow_read_ns : 0);
    EXPECT_GE(total, 300);
    EXPECT_LE(total, 1300);
    slow += d.slow ? 1 : 0;
  }
  EXPECT_GT(slow, draws / 20);  // about a tenth
  EXPECT_LT(slow, draws / 5);
}

TEST(SimulatedClockTest, SameParametersSameCounter) {
  const SimulatedClock a(Drifting(25'000'000));
  const SimulatedClock b(Drifting(25'000'000));
  for (int64_t i = 0; i < 100; ++i)
    EXPECT_EQ(a.TicksAt(kOrigin + i * 7'777'777), b.TicksAt(kOrigin + i * 7'777'777));
}

}  // namespace
}  // namespace chronolink::collector
