// Adaptive cadence: how an edge's closed windows move its probe interval.
#include "agent/estimate/probe_cadence.h"

#include <gtest/gtest.h>

namespace chronolink {
namespace {

WindowEstimate Window(EstimatorKind kind, int pure_forward, int pure_reverse, double uncertainty_ns = 2000,
                      int tuples = 50) {
  WindowEstimate e;
  e.estimator = kind;
  e.tuples = tuples;
  e.fit.ok = kind != EstimatorKind::kNone;
  e.fit.uncertainty_ns = uncertainty_ns;
  e.pure_forward = pure_forward;
  e.pure_reverse = pure_reverse;
  return e;
}

// With the fit on pure pairs only (--estimate-points pure), where pure
// pairs are what a max-margin window rests on.
ProbeCadenceOptions Options() {
  ProbeCadenceOptions o;
  o.slowest_interval_ns = 20'000'000;
  o.fastest_interval_ns = 2'500'000;
  o.target_pure_points = 16;
  o.every_probe_fit = false;
  return o;
}

TEST(ProbeCadence, StartsAtTheConfiguredIntervalAndStaysWhileWindowsMeetTheTarget) {
  ProbeCadence c(Options());
  std::string why;
  EXPECT_EQ(c.interval_ns(), 20'000'000);
  for (int i = 0; i < 10; ++i) EXPECT_FALSE(c.OnWindow(Window(EstimatorKind::kMaxMargin, 50, 30), false, &why));
  EXPECT_EQ(c.interval_ns(), 20'000'000);
}

TEST(ProbeCadence, AFallbackHalvesTheIntervalDownToTheFastestAndGoodWindowsBringItBack) {
  ProbeCadence c(Options());
  std::string why;
  ASSERT_TRUE(c.OnWindow(Window(EstimatorKind::kMinDelay, 2, 1), false, &why));
  EXPECT_EQ(c.interval_ns(), 10'000'000);
  EXPECT_NE(why.find("min_delay"), std::string::npos) << why;
  ASSERT_TRUE(c.OnWindow(Window(EstimatorKind::kNone, 0, 0), false, &why));
  EXPECT_EQ(c.interval_ns(), 5'000'000);
  c.OnWindow(Window(EstimatorKind::kMinDelay, 0, 0), false, &why);
  c.OnWindow(Window(EstimatorKind::kMinDelay, 0, 0), false, &why);
  EXPECT_EQ(c.interval_ns(), 2'500'000) << "never faster than the fastest";
  int windows = 0;
  while (c.interval_ns() < 20'000'000 && windows < 100) {
    c.OnWindow(Window(EstimatorKind::kMaxMargin, 40, 40), false, &why);
    ++windows;
  }
  EXPECT_EQ(c.interval_ns(), 20'000'000) << "never slower than the configured interval";
  EXPECT_EQ(windows, 10);  // x1.25 a window: 2.5 ms back to 20 ms in ten
}

TEST(ProbeCadence, ThinPurePairsOrAWideFitShortenTheInterval) {
  ProbeCadenceOptions o = Options();
  o.target_uncertainty_ns = 500;
  ProbeCadence c(o);
  std::string why;
  ASSERT_TRUE(c.OnWindow(Window(EstimatorKind::kMaxMargin, 40, 12, 100), false, &why));
  EXPECT_EQ(c.interval_ns(), 16'000'000);
  EXPECT_NE(why.find("12 pure pairs"), std::string::npos) << why;
  ASSERT_TRUE(c.OnWindow(Window(EstimatorKind::kMaxMargin, 40, 40, 900), false, &why));
  EXPECT_EQ(c.interval_ns(), 12'800'000);
  EXPECT_NE(why.find("uncertainty 900 ns"), std::string::npos) << why;
}

// A loaded path: few pure pairs per tuple. Probing faster would cost in
// proportion and buy little: the interval is held.
TEST(ProbeCadence, ALoadedPathOrAClockStepLeavesTheIntervalAlone) {
  ProbeCadence c(Options());
  std::string why;
  c.OnWindow(Window(EstimatorKind::kMinDelay, 0, 0), false, &why);
  const int64_t before = c.interval_ns();
  EXPECT_FALSE(c.OnWindow(Window(EstimatorKind::kMaxMargin, 30, 12, 2000, /*tuples=*/400), false, &why));
  EXPECT_FALSE(c.OnWindow(Window(EstimatorKind::kMinDelay, 0, 0), true, &why));
  EXPECT_EQ(c.interval_ns(), before);
  // The same 12 pure pairs out of 50 tuples: a quiet path probed too slowly.
  EXPECT_TRUE(c.OnWindow(Window(EstimatorKind::kMaxMargin, 30, 12, 2000, 50), false, &why));
  EXPECT_LT(c.interval_ns(), before);
}

// The default fit on every probe: a max_margin window rests on every probe,
// so thin pure pairs do not speed the edge up; a window that had to fall
// back to the pure pairs (max_margin_pure), a fallback, or a fit wider than
// the target uncertainty still do.
TEST(ProbeCadence, AFitOnEveryProbeIsNotPacedByPurePairs) {
  ProbeCadenceOptions o = Options();
  o.every_probe_fit = true;
  o.target_uncertainty_ns = 500;
  ProbeCadence c(o);
  std::string why;
  EXPECT_FALSE(c.OnWindow(Window(EstimatorKind::kMaxMargin, 40, 3, 100), false, &why)) << why;
  EXPECT_EQ(c.interval_ns(), 20'000'000);
  ASSERT_TRUE(c.OnWindow(Window(EstimatorKind::kMaxMarginPure, 40, 12, 100), false, &why));
  EXPECT_EQ(c.interval_ns(), 16'000'000);
  EXPECT_NE(why.find("12 pure pairs"), std::string::npos) << why;
  ASSERT_TRUE(c.OnWindow(Window(EstimatorKind::kMaxMargin, 40, 3, 900), false, &why));
  EXPECT_EQ(c.interval_ns(), 12'800'000);
  EXPECT_NE(why.find("uncertainty 900 ns"), std::string::npos) << why;
  ASSERT_TRUE(c.OnWindow(Window(EstimatorKind::kMinDelay, 2, 1), false, &why));
  EXPECT_EQ(c.interval_ns(), 6'400'000);
  // Every-probe windows within the target bring it back.
  ASSERT_TRUE(c.OnWindow(Window(EstimatorKind::kMaxMargin, 40, 3, 100), false, &why));
  EXPECT_EQ(c.interval_ns(), 8'000'000);
}

}  // namespace
}  // namespace chronolink
