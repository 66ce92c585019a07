// ClockTrajectory (clock/clock_trajectory.h) and the oscillator drawn as one
// (clock/oscillator_model.h): exact readings, their inverse across frequency
// changes and steps, sums of a clock and a correction, the text form of fine
// values, and an oscillator whose Allan deviation is the one asked for.
#include "clock/clock_trajectory.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "clock/oscillator_model.h"
#include "clock/virtual_clock.h"

namespace chronolink {
namespace {

constexpr int64_t kT0 = 1'795'320'926'123'456'789;

TEST(ClockTrajectory, ALinearTrajectoryReadsAsTheVirtualClock) {
  VirtualClockParams p;
  p.offset_ns = 12'345'678;
  p.drift_ppm = 37.5;
  p.t0_ns = kT0;
  const VirtualClock linear(p);
  const ClockTrajectory clock(kT0, kT0 + p.offset_ns, kFinePerNs + 37'500'000'000);
  for (int64_t dt : {int64_t{0}, int64_t{1}, int64_t{999}, int64_t{1'000'000'007}, int64_t{3'600'000'000'000},
                     int64_t{-5'000'000'000}}) {
    // The virtual clock rounds, the trajectory floors: at most 1 ns apart.
    EXPECT_LE(std::llabs(clock.ReadAt(kT0 + dt) - linear.Apply(kT0 + dt)), 1) << dt;
  }
  EXPECT_EQ(clock.ReadAt(kT0 + 1'000'000'000), kT0 + p.offset_ns + 1'000'037'500);
}

TEST(ClockTrajectory, AFrequencyChangeContinuesTheClockAndAStepMovesIt) {
  ClockTrajectory clock(kT0, kT0);
  ASSERT_TRUE(clock.ChangeAt(kT0 + 1'000'000'000, kFinePerNs + 50'000'000));  // +0.05 ppm from here
  EXPECT_EQ(clock.ReadAt(kT0 + 1'000'000'000), kT0 + 1'000'000'000);
  EXPECT_EQ(clock.ValueAt(kT0 + 3'000'000'000) - clock.ValueAt(kT0 + 1'000'000'000),
            static_cast<FineNs>(2'000'000'000) * (kFinePerNs + 50'000'000));  // 100 ns gained over 2 s
  ASSERT_TRUE(clock.ChangeAt(kT0 + 4'000'000'000, kFinePerNs, static_cast<FineNs>(-7) * kFinePerNs));
  EXPECT_EQ(clock.ReadAt(kT0 + 4'000'000'000), kT0 + 4'000'000'000 + 150 - 7);
  EXPECT_FALSE(clock.ChangeAt(kT0 + 4'000'000'000, kFinePerNs)) << "knots must move forward";
  EXPECT_FALSE(clock.ChangeAt(kT0, kFinePerNs));
  EXPECT_EQ(clock.knots().size(), 3u);
}

// A trajectory of random knots: frequency changes up to ±200 ppm and steps
// both ways, some of them larger than the segments they follow.
ClockTrajectory RandomClock(std::mt19937_64& rng, bool steps) {
  std::uniform_int_distribution<int64_t> gap(1, 3'000'000'000);
  std::uniform_int_distribution<int64_t> rate(-200'000'000'000, 200'000'000'000);
  std::uniform_int_distribution<int64_t> step(-2'000'000'000, 2'000'000'000);
  std::uniform_int_distribution<int> coin(0, 3);
  ClockTrajectory clock(kT0, kT0 + step(rng), kFinePerNs + rate(rng));
  int64_t t = kT0;
  for (int i = 0; i < 40; ++i) {
    t += gap(rng);
    const FineNs jump = steps && coin(rng) == 0 ? static_cast<FineNs>(step(rng)) * kFinePerNs + rate(rng) : 0;
    EXPECT_TRUE(clock.ChangeAt(t, kFinePerNs + rate(rng), jump));
  }
  return clock;
}

TEST(ClockTrajectory, TheTrueInstantOfAReadingIsTheFirstThatReadsIt) {
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 50; ++trial) {
    const ClockTrajectory clock = RandomClock(rng, /*steps=*/false);
    ASSERT_TRUE(clock.monotone());
    const int64_t first = clock.ReadAt(kT0), last = clock.ReadAt(clock.knots().back().t_ns + 1'000'000'000);
    std::uniform_int_distribution<int64_t> reading(first - 1'000'000, last);
    for (int i = 0; i < 200; ++i) {
      const int64_t v = reading(rng);
      const int64_t t = clock.TrueInstantOf(v);
      ASSERT_GE(clock.ReadAt(t), v) << v;
      ASSERT_LT(clock.ReadAt(t - 1), v) << v;
    }
  }
}

TEST(ClockTrajectory, AcrossAStepTheInverseTakesTheLaterInstantOrTheStep) {
  std::mt19937_64 rng(11);
  for (int trial = 0; trial < 50; ++trial) {
    const ClockTrajectory clock = RandomClock(rng, /*steps=*/true);
    const auto& knots = clock.knots();
    std::uniform_int_distribution<int64_t> instant(kT0, knots.back().t_ns + 1'000'000'000);
    for (int i = 0; i < 200; ++i) {
      const int64_t t_read = instant(rng);
      const int64_t v = clock.ReadAt(t_read);
      const int64_t t = clock.TrueInstantOf(v);
      // The clock reads v at t (or, skipped over by a step forward, first
      // passes it there).
      ASSERT_GE(clock.ReadAt(t), v);
      // Where the clock read v at t_read, t is that instant or a later one.
      ASSERT_GE(t, [&] {
        int64_t earliest = t_read;
        while (earliest > kT0 && clock.ReadAt(earliest - 1) == v) --earliest;
        return earliest;
      }());
    }
  }
}

TEST(ClockTrajectory, ASumIsTheSumAtEveryInstant) {
  std::mt19937_64 rng(3);
  const ClockTrajectory clock = RandomClock(rng, /*steps=*/true);
  ClockTrajectory correction(kT0 + 500'000'000, 0, -30'000'000);  // slewing at -0.03 ppm
  correction.ChangeAt(kT0 + 9'000'000'000, 0, static_cast<FineNs>(250) * kFinePerNs);
  correction.ChangeAt(kT0 + 20'000'000'000, 80'000'000);
  const ClockTrajectory sum = ClockTrajectory::Sum(clock, correction);
  EXPECT_FALSE(correction.monotone());
  std::uniform_int_distribution<int64_t> instant(kT0 - 1'000'000'000, clock.knots().back().t_ns + 5'000'000'000);
  for (int i = 0; i < 2000; ++i) {
    const int64_t t = instant(rng);
    ASSERT_EQ(sum.ValueAt(t), clock.ValueAt(t) + correction.ValueAt(t)) << t;
  }
}

TEST(ClockTrajectory, FineValuesGoThroughTextExactly) {
  std::mt19937_64 rng(5);
  const FineNs big = static_cast<FineNs>(kT0) * kFinePerNs * 10;
  for (FineNs v : {FineNs{0}, FineNs{-1}, FineNs{1}, big, -big, big + 987'654'321}) {
    const auto back = FineFromText(FineToText(v));
    ASSERT_TRUE(back.has_value()) << FineToText(v);
    EXPECT_TRUE(*back == v) << FineToText(v);
  }
  EXPECT_EQ(FineToText(static_cast<FineNs>(kT0) * kFinePerNs), "1795320926123456789000000000000000");
  for (const char* bad : {"", "-", "1.5", "12a", "+3", "1e9", "123456789012345678901234567890123456789"}) {
    EXPECT_FALSE(FineFromText(bad).has_value()) << bad;
  }
}

// Overlapping Allan deviation at tau = m·h from the clock's values at the
// knots (phase x in seconds).
double AllanDeviation(const ClockTrajectory& clock, int64_t h_ns, int m) {
  std::vector<double> x;
  for (const auto& k : clock.knots()) {
    x.push_back(static_cast<double>(k.value - static_cast<FineNs>(k.t_ns) * kFinePerNs) * 1e-24);
  }
  const double tau = static_cast<double>(m) * static_cast<double>(h_ns) * 1e-9;
  double sum = 0;
  size_t n = 0;
  for (size_t i = 0; i + 2 * m < x.size(); ++i, ++n) {
    const double d = x[i + 2 * m] - 2 * x[i + m] + x[i];
    sum += d * d;
  }
  return std::sqrt(sum / (2.0 * tau * tau * static_cast<double>(n)));
}

TEST(OscillatorModel, ItsAllanDeviationIsTheOneAskedFor) {
  const int64_t h = 250'000'000;
  // White FM alone: sigma_y(tau) = a / sqrt(tau).
  OscillatorParams white;
  white.white_fm_adev_1s = 2e-9;
  white.frequency_ppm = 12.5;
  white.seed = 42;
  const ClockTrajectory w = OscillatorTrajectory(white, kT0, kT0 + 4'000'000'000'000);  // 4000 s
  for (int m : {4, 64}) {
    const double tau = m * 0.25;
    EXPECT_NEAR(AllanDeviation(w, h, m) / (2e-9 / std::sqrt(tau)), 1.0, 0.15) << "tau " << tau;
  }
  // Random-walk FM alone: sigma_y(tau) = a·sqrt(tau).
  OscillatorParams walk;
  walk.random_walk_fm_adev_1s = 1e-11;
  walk.seed = 43;
  const ClockTrajectory r = OscillatorTrajectory(walk, kT0, kT0 + 40'000'000'000'000);  // 40000 s
  for (int m : {16, 256}) {
    const double tau = m * 0.25;
    EXPECT_NEAR(AllanDeviation(r, h, m) / (1e-11 * std::sqrt(tau)), 1.0, 0.35) << "tau " << tau;
  }
  // The constant part and the start offset are where they were asked.
  OscillatorParams linear;
  linear.offset_ns = -4'000'000;
  linear.frequency_ppm = -20;
  const ClockTrajectory l = OscillatorTrajectory(linear, kT0, kT0 + 10'000'000'000);
  EXPECT_EQ(l.knots().size(), 1u);
  EXPECT_EQ(l.ReadAt(kT0 + 1'000'000'000), kT0 - 4'000'000 + 1'000'000'000 - 20'000);
}

TEST(OscillatorModel, TheSameSeedDrawsTheSameKnots) {
  OscillatorParams p;
  p.white_fm_adev_1s = 1e-9;
  p.random_walk_fm_adev_1s = 1e-11;
  p.seed = 9;
  const auto a = OscillatorTrajectory(p, kT0, kT0 + 60'000'000'000);
  const auto b = OscillatorTrajectory(p, kT0, kT0 + 60'000'000'000);
  EXPECT_EQ(a.knots(), b.knots());
  EXPECT_GE(a.knots().size(), 240u);
  p.seed = 10;
  EXPECT_NE(OscillatorTrajectory(p, kT0, kT0 + 60'000'000'000).knots(), a.knots());
}

}  // namespace
}  // namespace chronolink
