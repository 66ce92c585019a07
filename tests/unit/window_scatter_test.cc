// The one-sigma of an edge's window offsets: the scatter of its recent
// windows about a parabola, scaled for heavy tails, plus a floor.
#include "agent/estimate/window_scatter.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

namespace chronolink {
namespace {

constexpr int64_t kWindow = 2'000'000'000;

LineFit Fit(double beta_ns, double alpha) {
  LineFit f;
  f.ok = true;
  f.beta_ns = beta_ns;
  f.alpha = alpha;
  return f;
}

TEST(WindowScatter, NoSigmaUntilEnoughWindowsThenTheFloorForAPerfectLine) {
  WindowScatter s(kWindow);
  const double alpha = 45e-6;
  int64_t x0 = 1'000'000'000'000'000'000;
  for (int k = 0; k < 5; ++k) {  // min_history is 6
    EXPECT_FALSE(s.Add(x0 + k * kWindow, Fit(3.7e6 + alpha * k * kWindow, alpha)).has_value()) << k;
  }
  const auto sigma = s.Add(x0 + 5 * kWindow, Fit(3.7e6 + alpha * 5 * kWindow, alpha));
  ASSERT_TRUE(sigma.has_value());
  EXPECT_NEAR(sigma->sigma_ns, WindowScatterOptions{}.floor_ns, 1e-6);
  EXPECT_NEAR(sigma->shared_ns, WindowScatterOptions{}.floor_ns, 1e-6) << "all of it is the floor";
}

// Independent errors of sigma in every window: the estimate recovers sigma
// (and 3 sigma covers nearly every error).
TEST(WindowScatter, RecoversTheNoiseOfIndependentWindowErrors) {
  WindowScatterOptions o;
  o.floor_ns = 0;
  o.tail_factor = 1;
  o.history = 64;
  WindowScatter s(kWindow, o);
  std::mt19937_64 rng(5);
  std::normal_distribution<double> noise(0, 40);
  const double alpha = -20e-6;
  double last_sigma = 0;
  int covered = 0, n = 0;
  for (int k = 0; k < 400; ++k) {
    const double err = noise(rng);
    const auto sigma = s.Add(k * kWindow, Fit(1000 + alpha * k * kWindow + err, alpha));
    if (!sigma) continue;
    last_sigma = sigma->sigma_ns;
    EXPECT_EQ(sigma->shared_ns, 0) << "no floor, no asymmetry: nothing the directions share";
    EXPECT_NEAR(sigma->scatter_ns, sigma->sigma_ns, 1e-9) << "no excess, no shift: all of it is the scatter";
    ++n;
    covered += std::abs(err) <= 3 * sigma->sigma_ns;
  }
  EXPECT_NEAR(last_sigma, 40, 12);
  EXPECT_GE(covered, n * 97 / 100);
}

// A clock whose frequency moves (an oscillator's wander, a daemon's
// steering) bends the true offset over the 24 s of history: that bend is
// not the windows' noise. About a straight line (trend_degree 1, the
// scatter until 2026-12-05) it was counted as noise.
TEST(WindowScatter, AClockWhoseFrequencyMovesIsNotNoise) {
  WindowScatterOptions parabola;
  parabola.floor_ns = 0;
  WindowScatterOptions line = parabola;
  line.trend_degree = 1;
  WindowScatter by_parabola(kWindow, parabola), by_line(kWindow, line);
  const double bend_ns_per_s2 = 1;  // the drift moving 1 ppb a second: 0.02 ppm, 242 ns in 22 s
  std::optional<WindowSigma> a, b;
  for (int k = 0; k < 12; ++k) {
    const double t = 2.0 * k;
    const double beta = 700 + 3e-6 * t * 1e9 + 0.5 * bend_ns_per_s2 * t * t + (k % 2 ? 3 : -3);
    a = by_parabola.Add(k * kWindow, Fit(beta, 0));
    b = by_line.Add(k * kWindow, Fit(beta, 0));
  }
  ASSERT_TRUE(a.has_value() && b.has_value());
  EXPECT_LT(a->scatter_ns, 8) << "the +/-3 ns noise, scaled for tails";
  EXPECT_GT(a->scatter_ns, 2);
  EXPECT_GT(b->scatter_ns, 15) << "the line counts the bend as noise";
}

// Options asking for a trend the history cannot hold, or too short a
// history, still get a parabola (or line) with three degrees of freedom.
TEST(WindowScatter, KeepsThreeDegreesOfFreedomWhateverTheOptionsAsk) {
  WindowScatterOptions o;
  o.trend_degree = 7;
  o.min_history = 2;
  WindowScatter s(kWindow, o);
  for (int k = 0; k < 5; ++k) EXPECT_FALSE(s.Add(k * kWindow, Fit(k % 2 ? 4 : -4, 0)).has_value()) << k;
  const auto sigma = s.Add(5 * kWindow, Fit(4, 0));
  ASSERT_TRUE(sigma.has_value()) << "six windows hold a parabola and three degrees of freedom";
  EXPECT_GT(sigma->scatter_ns, 1) << "a trend of degree 7 through six windows would leave no scatter";
}

// A declared path asymmetry A (forward - reverse within +/- A) moves the
// offset by up to A/2, counted as uniform: sigma A / (2 sqrt 3) in quadrature.
TEST(WindowScatter, ADeclaredPathAsymmetryWidensSigma) {
  WindowScatterOptions o;
  o.floor_ns = 0;
  o.path_asymmetry_ns = 600;
  WindowScatter s(kWindow, o);
  std::optional<WindowSigma> sigma;
  for (int k = 0; k < 6; ++k) sigma = s.Add(k * kWindow, Fit(42, 0));
  ASSERT_TRUE(sigma.has_value());
  EXPECT_NEAR(sigma->sigma_ns, 600 / (2 * std::sqrt(3.0)), 1e-9);
  EXPECT_GE(3 * sigma->sigma_ns, 300.0) << "3 sigma covers the largest shift, A/2";
  EXPECT_NEAR(sigma->shared_ns, sigma->sigma_ns, 1e-9) << "the link's asymmetry is seen alike both ways";
}

// The scatter is each direction's own; the floor and the asymmetry are the
// link's: shared_ns is their quadrature sum, sigma_ns adds the scatter.
TEST(WindowScatter, SharedPartIsTheFloorAndAsymmetryNotTheScatter) {
  WindowScatterOptions o;
  o.floor_ns = 5;
  o.path_asymmetry_ns = 100;
  o.tail_factor = 1;
  WindowScatter s(kWindow, o);
  std::optional<WindowSigma> sigma;
  const double errs[] = {30, -30, 30, -30, 30, -30};
  for (int k = 0; k < 6; ++k) sigma = s.Add(k * kWindow, Fit(errs[k], 0));
  ASSERT_TRUE(sigma.has_value());
  const double shared = std::sqrt(25 + std::pow(100 / (2 * std::sqrt(3.0)), 2));
  EXPECT_NEAR(sigma->shared_ns, shared, 1e-9);
  EXPECT_GT(sigma->sigma_ns, shared + 10) << "the scatter of +/-30 ns adds to it";
}

// One bad window in the history does not widen the sigma of the windows
// after it: the scatter is the median absolute residual, not the RMS.
TEST(WindowScatter, OneBadWindowDoesNotWidenTheNextOnes) {
  for (const double memory : {0.0, 0.75}) {
    WindowScatterOptions o;
    o.floor_ns = 0;
    o.sigma_memory = memory;
    WindowScatter s(kWindow, o);
    const double errs[] = {10, -10, 10, -10, 10, 400, 10, -10, 10, -10, 10, -10};
    std::optional<WindowSigma> sigma;
    for (int k = 0; k < 12; ++k) sigma = s.Add(k * kWindow, Fit(errs[k], 0));
    ASSERT_TRUE(sigma.has_value());
    // The bad window still pulls the least-squares line by ~33 ns; the RMS
    // scatter (x 1.4, the sigma before) would be ~180 ns. The memory keeps
    // three quarters of the windows' just after it, whose short trends it
    // pulled further: 87 ns.
    EXPECT_LT(sigma->sigma_ns, memory > 0 ? 90 : 80) << memory;
    EXPECT_GT(sigma->sigma_ns, 10) << memory;
  }
}

// A window whose own sigma dips far under the last windows' (its band and
// its floors' shift narrowed while the path's asymmetry still swung) keeps
// sigma_memory times their median; one wider than that keeps its own. A
// stalled window's own sigma is no memory for the next, and a Reset
// forgets (docs/estimator.md §8).
TEST(WindowScatter, ASigmaKeepsThreeQuartersOfTheRecentMedian) {
  WindowScatterOptions o;
  o.floor_ns = 0;
  WindowScatter s(kWindow, o);
  LineFit wide = Fit(0, 0);
  wide.margin_ns = 1000;
  wide.uncertainty_ns = 1200;  // a band 200 ns beyond the margin: sigma 100 ns
  for (int k = 0; k < 10; ++k) s.Add(k * kWindow, wide);
  const std::optional<WindowSigma> dipped = s.Add(10 * kWindow, Fit(0, 0));
  ASSERT_TRUE(dipped.has_value());
  EXPECT_NEAR(dipped->sigma_ns, 75.0, 1e-9) << "0.75 of the median, 100 ns";
  EXPECT_NEAR(dipped->scatter_ns, 0.0, 1e-9) << "the scatter part as it is";
  EXPECT_NEAR(s.Add(11 * kWindow, wide)->sigma_ns, 100.0, 1e-9) << "its own, over the memory's";

  o.sigma_memory = 0;
  WindowScatter without(kWindow, o);
  for (int k = 0; k < 10; ++k) without.Add(k * kWindow, wide);
  EXPECT_NEAR(without.Add(10 * kWindow, Fit(0, 0))->sigma_ns, 0.0, 1e-9) << "no memory: the dip";

  s.Reset();
  for (int k = 20; k < 26; ++k) s.Add(k * kWindow, Fit(0, 0));
  EXPECT_NEAR(s.Add(26 * kWindow, Fit(0, 0))->sigma_ns, 0.0, 1e-9) << "a Reset forgets";
}

TEST(WindowScatter, AStalledWindowsSigmaIsNoMemoryForTheNext) {
  WindowScatterOptions o;
  o.floor_ns = 0;
  WindowScatter s(kWindow, o);
  LineFit ordinary = Fit(0, 0);
  ordinary.margin_ns = ordinary.uncertainty_ns = 1000;  // a 1 us band, all of it margin
  // Seven ordinary windows (sigmas from the sixth on: two), then six
  // stalled ones, which remembered would be the median. Six in a row are
  // no gap in the trend (more than four windows without a fit are): the
  // window after them still has its sigma, from the seven before.
  for (int k = 0; k < 7; ++k) s.Add(k * kWindow, ordinary);
  for (int k = 7; k < 13; ++k) {
    LineFit stalled = ordinary;
    stalled.uncertainty_ns = 1e6;  // a band far over 8 times the median: a stall's
    const std::optional<WindowSigma> sigma = s.Add(k * kWindow, stalled);
    ASSERT_TRUE(sigma.has_value()) << k;
    EXPECT_GT(sigma->sigma_ns, 1e5) << k;
  }
  const std::optional<WindowSigma> after = s.Add(13 * kWindow, ordinary);
  ASSERT_TRUE(after.has_value()) << "a run of stalled windows restarted the trend";
  EXPECT_NEAR(after->sigma_ns, 0.0, 1e-9) << "the stalled windows' sigmas are not remembered";
}

// Six windows on a perfect line, no floor: a window's sigma is then only
// what tells it apart.
WindowScatter PerfectLineWithoutFloor() {
  WindowScatterOptions o;
  o.floor_ns = 0;
  WindowScatter s(kWindow, o);
  for (int k = 0; k < 6; ++k) s.Add(k * kWindow, Fit(0, 0));
  return s;
}

// The window the scatter cannot tell apart: a fit whose band of separating
// lines widens at x0 beyond its margin (its slope is loosely held) gets
// that excess in quadrature.
TEST(WindowScatter, ABandWiderThanTheMarginWidensThatWindowsSigma) {
  WindowScatter s = PerfectLineWithoutFloor();
  LineFit loose = Fit(0, 0);
  loose.margin_ns = 1000;
  loose.uncertainty_ns = 1240;
  const auto sigma = s.Add(6 * kWindow, loose);
  ASSERT_TRUE(sigma.has_value());
  EXPECT_NEAR(sigma->sigma_ns, 120, 1e-9) << "a perfect line: all of it is half the band's excess";
  EXPECT_EQ(sigma->shared_ns, 0) << "each direction's own";
  LineFit tight = Fit(0, 0);
  tight.margin_ns = tight.uncertainty_ns = 1000;
  EXPECT_NEAR(s.Add(7 * kWindow, tight)->sigma_ns, 0, 1e-9);
}

// A window whose floors' line moved far from the hard line rested on a few
// packets well under the others: half that shift, in quadrature.
TEST(WindowScatter, AFloorsLineFarFromTheHardLineWidensThatWindowsSigma) {
  WindowScatter s = PerfectLineWithoutFloor();
  LineFit shifted = Fit(0, 0);
  shifted.floor_shift_ns = -80;
  EXPECT_NEAR(s.Add(6 * kWindow, shifted)->sigma_ns, 40, 1e-9);
  shifted.margin_ns = 1000;
  shifted.uncertainty_ns = 1060;  // half the band's excess, 30, beside half the shift, 40
  EXPECT_NEAR(s.Add(7 * kWindow, shifted)->sigma_ns, 50, 1e-9);
  EXPECT_NEAR(s.Add(8 * kWindow, Fit(0, 0))->sigma_ns, 0, 1e-9);
}

// The parts a saved run re-weighs (bench/sigma_replay.py): the scatter
// alone is reported, and the sigma is it, the weighted excess and shift and
// the floor in quadrature.
TEST(WindowScatter, ReportsItsScatterSoTheWeightsCanBeReplayed) {
  WindowScatter s(kWindow);
  const double wobble[] = {12, -7, 3, -15, 9, -4, 6};
  std::optional<WindowSigma> sigma;
  LineFit f = Fit(0, 0);
  f.floor_shift_ns = 30;
  f.margin_ns = 900;
  f.uncertainty_ns = 940;
  for (int k = 0; k < 7; ++k) {
    f.beta_ns = wobble[k];
    sigma = s.Add(k * kWindow, f);
  }
  ASSERT_TRUE(sigma.has_value());
  EXPECT_GT(sigma->scatter_ns, 1) << "the windows wobble about any line";
  const WindowScatterOptions o;
  EXPECT_NEAR(sigma->sigma_ns * sigma->sigma_ns,
              sigma->scatter_ns * sigma->scatter_ns + std::pow(o.band_excess_weight * 40, 2) +
                  std::pow(o.floor_shift_weight * 30, 2) + o.floor_ns * o.floor_ns,
              1e-6);
}

// A window whose line is the mean of its span's and its later half's takes
// the band and the floors' shift at later_half_factor of their weights; its
// scatter and floor are the same windows' as the span's alone.
TEST(WindowScatter, AWindowAveragedWithItsLaterHalfTakesTheFactorOnItsBandAndShift) {
  WindowScatterOptions o;
  o.later_half_factor = 0.3;
  WindowScatter span(kWindow, o), mean(kWindow, o);
  const double wobble[] = {12, -7, 3, -15, 9, -4, 6};
  std::optional<WindowSigma> alone, averaged;
  LineFit f = Fit(0, 0);
  f.floor_shift_ns = -300;
  f.margin_ns = 900;
  f.uncertainty_ns = 1300;
  for (int k = 0; k < 7; ++k) {
    f.beta_ns = wobble[k];
    alone = span.Add(k * kWindow, f, 0, WindowLine::kSpan);
    averaged = mean.Add(k * kWindow, f, 0, WindowLine::kMeanWithLaterHalf);
  }
  ASSERT_TRUE(alone.has_value() && averaged.has_value());
  EXPECT_DOUBLE_EQ(averaged->scatter_ns, alone->scatter_ns);
  EXPECT_DOUBLE_EQ(averaged->shared_ns, alone->shared_ns);
  const auto sigma2 = [&](double factor) {
    return averaged->scatter_ns * averaged->scatter_ns + std::pow(factor * o.band_excess_weight * 400, 2) +
           std::pow(factor * o.floor_shift_weight * 300, 2) + o.floor_ns * o.floor_ns;
  };
  EXPECT_NEAR(alone->sigma_ns * alone->sigma_ns, sigma2(1), 1e-6);
  EXPECT_NEAR(averaged->sigma_ns * averaged->sigma_ns, sigma2(0.3), 1e-6);
  EXPECT_LT(averaged->sigma_ns, 0.5 * alone->sigma_ns) << "the band and the shift dominate this window";
}

// A stalled path's window, as w1's (2026-12-06): its band 300 times the
// others' and its offset 800 us off. Its own sigma sees it; the windows
// after it get the sigmas they would get had it not been there, where the
// parabola through it gave them sigmas of 43-167 us. With the rule off
// they are wide. (bench/sigma_replay.py's selftest checks its copy alike.)
TEST(WindowScatter, AStalledPathsWindowIsLeftOutOfTheNextTrends) {
  auto run = [](double factor, bool with_stall) {
    WindowScatterOptions o;
    o.stalled_band_factor = factor;
    WindowScatter s(kWindow, o);
    std::vector<double> sigmas;
    for (int k = 0; k < 16; ++k) {
      const bool stall = k == 10;
      if (stall && !with_stall) continue;
      LineFit f = Fit(stall ? 8e5 : 10.0 * (k % 2 ? -1 : 1), 0);
      f.uncertainty_ns = stall ? 3e5 : 1000 + k;
      f.margin_ns = stall ? 1e5 : 1000;
      const auto sigma = s.Add(k * kWindow, f);
      sigmas.push_back(sigma ? sigma->sigma_ns : -1);
    }
    return sigmas;
  };
  const std::vector<double> guarded = run(WindowScatterOptions{}.stalled_band_factor, true);
  const std::vector<double> without = run(WindowScatterOptions{}.stalled_band_factor, false);
  const std::vector<double> unguarded = run(std::numeric_limits<double>::infinity(), true);
  ASSERT_EQ(guarded.size(), 16u);
  EXPECT_GT(guarded[10], 1e5) << "the stalled window's own sigma";
  for (int k = 11; k < 16; ++k) {
    EXPECT_DOUBLE_EQ(guarded[k], without[k - 1]) << k;
    EXPECT_LT(guarded[k], 100) << k;
    EXPECT_GT(unguarded[k], 1e4) << k << ": the parabola through the stall";
  }
}

// A 20 s span's trend holds 12 x (20 s / 4 s)^0.75 = 40 windows: 20
// windows 1 us off then 40 on a perfect line leave the 60th with the floor
// alone; in proportion to the span (power 1, 60 windows) its parabola
// would still span the step, which no parabola follows.
TEST(WindowScatter, ALongSpansTrendReachesBackFortyWindows) {
  const auto last_sigma = [](double power) {
    WindowScatterOptions o;
    o.sigma_memory = 0;  // the trend's own sigma
    o.history_span_power = power;
    WindowScatter s(kWindow, o);
    std::optional<WindowSigma> sigma;
    for (int k = 0; k < 60; ++k) {
      const double beta = k < 20 ? 1000.0 : 0.0;
      sigma = s.Add(k * kWindow, Fit(beta, 0), 10 * kWindow);
    }
    return sigma;
  };
  const std::optional<WindowSigma> stretched = last_sigma(WindowScatterOptions{}.history_span_power);
  ASSERT_TRUE(stretched.has_value());
  EXPECT_NEAR(stretched->sigma_ns, WindowScatterOptions{}.floor_ns, 1e-6);
  const std::optional<WindowSigma> in_proportion = last_sigma(1.0);
  ASSERT_TRUE(in_proportion.has_value());
  EXPECT_GT(in_proportion->sigma_ns, 50);
}

TEST(WindowScatter, AGapOrAResetRestartsTheHistory) {
  WindowScatter s(kWindow);
  for (int k = 0; k < 6; ++k) s.Add(k * kWindow, Fit(0, 0));
  ASSERT_TRUE(s.Add(6 * kWindow, Fit(0, 0)).has_value());
  EXPECT_FALSE(s.Add(20 * kWindow, Fit(0, 0)).has_value()) << "a gap of 14 windows";
  for (int k = 21; k < 23; ++k) s.Add(k * kWindow, Fit(0, 0));
  EXPECT_FALSE(s.Add(23 * kWindow, Fit(0, 0)).has_value()) << "four windows since the gap";
  for (int k = 24; k < 26; ++k) s.Add(k * kWindow, Fit(0, 0));
  ASSERT_TRUE(s.Add(26 * kWindow, Fit(0, 0)).has_value());
  s.Reset();
  EXPECT_FALSE(s.Add(27 * kWindow, Fit(0, 0)).has_value());
  LineFit bad;  // not a fit
  EXPECT_FALSE(s.Add(28 * kWindow, bad).has_value());
}

}  // namespace
}  // namespace chronolink
