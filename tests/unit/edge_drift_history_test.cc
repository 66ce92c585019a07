#include "agent/estimate/edge_drift_history.h"

#include <gtest/gtest.h>

namespace chronolink {
namespace {

constexpr int64_t kWindow = 2'000'000'000;

FitSpanEvidence Evidence(double noise_ns, double wander) {
  FitSpanEvidence e;
  e.window_noise_ns = noise_ns;
  e.wander_ns_per_sqrt_s = wander;
  e.windows = 16;
  return e;
}

TEST(EdgeDriftHistory, TheMedianOfTheLastWindowsOnceThereAreEnough) {
  EdgeDriftHistory h({.windows = 4, .min_windows = 3});
  h.Add(1e-6);
  h.Add(5e-6);
  EXPECT_FALSE(h.Slope().has_value()) << "two slopes: fewer than min_windows";
  h.Add(2e-6);
  ASSERT_TRUE(h.Slope().has_value());
  EXPECT_DOUBLE_EQ(*h.Slope(), 2e-6);
  h.Add(3e-6);  // four: the mean of the middle two
  EXPECT_DOUBLE_EQ(*h.Slope(), 2.5e-6);
  h.Add(9e-6);  // the first (1e-6) drops out: 5, 2, 3, 9
  EXPECT_DOUBLE_EQ(*h.Slope(), 4e-6);
  h.Reset();
  EXPECT_FALSE(h.Slope().has_value()) << "a step restarts the history";
}

TEST(EdgeDriftHistory, NoneWhereTurnedOffOrTheSlopeIsNotANumber) {
  EdgeDriftHistory off({.windows = 0, .min_windows = 1});
  off.Add(1e-6);
  EXPECT_FALSE(off.Slope().has_value());
  EdgeDriftHistory h({.windows = 5, .min_windows = 1});
  h.Add(std::numeric_limits<double>::quiet_NaN());
  EXPECT_FALSE(h.Slope().has_value());
}

TEST(EdgeDriftHistory, TheOwnSlopesWeightWeighsTheWanderAgainstTheNoise) {
  EdgeDriftHistory h({.windows = 20, .min_windows = 1});
  h.Add(3e-6);
  EXPECT_FALSE(h.PriorFor(std::nullopt, 3 * kWindow, kWindow).has_value()) << "no evidence: a fixed span";
  // w^2 S^2 / (w^2 S^2 + 12 sigma^2 W): S = 6 s, W = 2 s.
  const auto p = h.PriorFor(Evidence(25, 11), 3 * kWindow, kWindow);
  ASSERT_TRUE(p.has_value());
  EXPECT_DOUBLE_EQ(p->slope, 3e-6);
  const double drift = 11.0 * 11.0 * 36.0, noise = 12.0 * 25.0 * 25.0 * 2.0;
  EXPECT_NEAR(p->own_weight, drift / (drift + noise), 1e-12);
  EXPECT_DOUBLE_EQ(h.PriorFor(Evidence(25, 0), 3 * kWindow, kWindow)->own_weight, 0.0) << "no wander: the prior";
  EXPECT_DOUBLE_EQ(h.PriorFor(Evidence(0, 11), 3 * kWindow, kWindow)->own_weight, 1.0) << "no noise: its own";
  // A longer span gives the wander more room and the own slope less noise.
  EXPECT_GT(h.PriorFor(Evidence(25, 11), 6 * kWindow, kWindow)->own_weight, p->own_weight);
}

}  // namespace
}  // namespace chronolink
