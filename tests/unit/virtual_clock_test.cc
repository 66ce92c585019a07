#include "clock/virtual_clock.h"

#include <gtest/gtest.h>

#include <cmath>

#include "clock/clock_reader.h"

namespace chronolink {
namespace {

constexpr int64_t kEpoch = 1'790'000'000'000'000'000LL;  // an instant in 2026, in ns

TEST(VirtualClock, AppliesOffsetAndDriftFromT0) {
  VirtualClock c({3'700'000, 45.0, kEpoch});
  EXPECT_EQ(c.Apply(kEpoch), kEpoch + 3'700'000);
  // 10 s after t0, 45 ppm adds 450 us.
  EXPECT_EQ(c.Apply(kEpoch + 10'000'000'000LL), kEpoch + 10'000'000'000LL + 3'700'000 + 450'000);
  // Before t0 the drift term is negative.
  EXPECT_EQ(c.Apply(kEpoch - 1'000'000'000LL), kEpoch - 1'000'000'000LL + 3'700'000 - 45'000);
}

TEST(VirtualClock, InvertIsExactToOneNanosecond) {
  VirtualClock c({-12'345'678, -87.5, kEpoch});
  for (int64_t dt : {0LL, 1LL, 999'999'937LL, 3'600'000'000'000LL, -7'000'000'001LL}) {
    const int64_t real = kEpoch + dt;
    EXPECT_LE(std::llabs(c.Invert(c.Apply(real)) - real), 1) << dt;
  }
}

TEST(VirtualClock, IdentityLeavesTimestampsAlone) {
  NodeClock clock;
  EXPECT_EQ(clock.Ingest(kEpoch + 17), kEpoch + 17);
  NodeClock skewed(VirtualClockParams{5, 0.0, kEpoch});
  EXPECT_EQ(skewed.Ingest(kEpoch + 17), kEpoch + 22);
  EXPECT_EQ(skewed.ToReal(kEpoch + 22), kEpoch + 17);
}

TEST(TrueRelativeOffset, MatchesDirectEvaluationOfBothClocks) {
  const VirtualClockParams a{1'000, 10.0, kEpoch};
  const VirtualClockParams b{3'701'000, 55.0, kEpoch};
  const int64_t t = kEpoch + 20'000'000'000LL;  // a real instant
  const int64_t x_a = VirtualClock(a).Apply(t);
  const RelativeTruth truth = TrueRelativeOffset(a, b, x_a);
  const double direct = static_cast<double>(VirtualClock(b).Apply(t) - VirtualClock(a).Apply(t));
  EXPECT_NEAR(truth.beta_ns, direct, 1.0);
  EXPECT_NEAR(truth.alpha, 45e-6 / (1 + 10e-6), 1e-12);
  // Symmetry: b's view of a is the negation.
  const RelativeTruth back = TrueRelativeOffset(b, a, VirtualClock(b).Apply(t));
  EXPECT_NEAR(back.beta_ns, -direct, 1.0);
}

// A step of the clock (test beds inject them): from the step's real instant
// on, the clock reads step_ns more; inverting picks the later instant where
// the clock reads a value twice, and the step's instant for a value skipped.
TEST(VirtualClock, StepsAtItsInstantAndInvertsAcrossIt) {
  VirtualClockParams p{1'000, 0.0, kEpoch};
  p.step_at_ns = kEpoch + 10'000'000'000LL;
  p.step_ns = -1'000'000'000;  // back 1 s
  const VirtualClock back(p);
  EXPECT_FALSE(p.IsIdentity());
  EXPECT_EQ(back.Apply(p.step_at_ns - 1), p.step_at_ns - 1 + 1'000);
  EXPECT_EQ(back.Apply(p.step_at_ns), p.step_at_ns + 1'000 - 1'000'000'000);
  const int64_t read_twice = p.step_at_ns - 500'000'000 + 1'000;
  EXPECT_EQ(back.Invert(read_twice), p.step_at_ns + 500'000'000) << "the later instant";
  EXPECT_EQ(back.Invert(back.Apply(kEpoch)), kEpoch);

  p.step_ns = 1'000'000;  // forwards 1 ms
  const VirtualClock forwards(p);
  EXPECT_EQ(forwards.Invert(p.step_at_ns + 1'000 + 500'000), p.step_at_ns) << "a value the step skipped";
  EXPECT_EQ(forwards.Invert(forwards.Apply(p.step_at_ns + 7)), p.step_at_ns + 7);

  // The truth between a stepped clock and a steady one steps with it.
  const VirtualClockParams steady{0, 0.0, kEpoch};
  EXPECT_NEAR(TrueRelativeOffset(steady, p, p.step_at_ns - 1'000'000).beta_ns, 1'000, 1e-6);
  EXPECT_NEAR(TrueRelativeOffset(steady, p, p.step_at_ns + 1'000'000).beta_ns, 1'001'000, 1e-6);
}

}  // namespace
}  // namespace chronolink
