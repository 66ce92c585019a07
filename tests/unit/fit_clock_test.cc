// The fit clock (clock/fit_clock.h): a disciplined REALTIME's stamps mapped
// onto the node's MONOTONIC_RAW, scaled and set at the start, checked
// against the exact clocks (ClockTrajectory) of a node whose daemon changes
// the rate every second and steps the clock once: within 2 ns of the
// truth, stamps up to a sampling interval past the newest sample
// included; nothing of the step in F; REALTIME and its rate given back.
#include "clock/fit_clock.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <random>

#include "clock/clock_trajectory.h"
#include "tests/support/disciplined_clock.h"

namespace chronolink {
namespace {

constexpr int64_t kT0 = 1'795'320'926'000'000'000;
constexpr int64_t kMs = 1'000'000;
constexpr int64_t kSecond = 1'000'000'000;

using testing::DisciplinedClock;

// Rate changes of up to 0.5 ppm every second, a 2 ms step forward at 30 s.
DisciplinedClock MakeNode(uint64_t seed) {
  return testing::MakeDisciplinedClock(seed, kT0, 500'000'000, 2 * kMs);
}

TEST(FitAnchor, RunsAtTheAnchorsRateAndInvertsToTheNanosecond) {
  std::mt19937_64 rng(3);
  std::uniform_int_distribution<int64_t> rate(-500'000'000'000, 500'000'000'000), offset(-100 * kSecond, 100 * kSecond);
  for (int i = 0; i < 2000; ++i) {
    const FitAnchor a{5'000 * kSecond + offset(rng), kT0 + offset(rng), rate(rng)};
    EXPECT_EQ(a.FitOfRaw(a.raw_ns), a.realtime_ns);
    const int64_t raw = a.raw_ns + offset(rng);
    const int64_t fit = a.FitOfRaw(raw);
    const long double expected = static_cast<long double>(a.realtime_ns) +
                                 static_cast<long double>(raw - a.raw_ns) * (1 + a.rate_fine * 1e-15L);
    EXPECT_LE(std::fabs(static_cast<long double>(fit) - expected), 0.5L + 1e-6L);
    EXPECT_LE(std::llabs(a.RawOfFit(fit) - raw), 1);
  }
}

// A point of REALTIME moved from one anchor's F to another's: against a
// REALTIME that is an exact line in RAW, the moved point gives F_to's value
// at that RAW, REALTIME's rate against F_to, and REALTIME − F_to a second on.
TEST(FitAnchor, APointMovesToAnotherAnchorAtTheSameRaw) {
  std::mt19937_64 rng(11);
  std::uniform_int_distribution<int64_t> rate(-500'000'000'000, 500'000'000'000), offset(-100 * kSecond, 100 * kSecond);
  for (int i = 0; i < 2000; ++i) {
    const FitAnchor from{5'000 * kSecond + offset(rng), kT0 + offset(rng), rate(rng)};
    const FitAnchor to{5'000 * kSecond + offset(rng), kT0 + offset(rng), rate(rng)};
    const int64_t raw0 = 5'000 * kSecond + offset(rng);
    const int64_t realtime0 = kT0 + offset(rng);
    const long double q = rate(rng) * 1e-15L;  // REALTIME's rate against RAW, less 1
    auto realtime_at = [&](int64_t raw) {
      return static_cast<long double>(realtime0) + static_cast<long double>(raw - raw0) * (1 + q);
    };
    auto rate_against = [&](const FitAnchor& a) { return ((1 + q) / (1 + a.rate_fine * 1e-15L) - 1) * 1e15L; };
    const FitPoint p{from.FitOfRaw(raw0), realtime0, static_cast<int64_t>(std::llround(rate_against(from)))};

    const FitPoint moved = PointOnAnchor(p, from, to);
    EXPECT_EQ(moved.realtime_ns, realtime0);
    EXPECT_LE(std::llabs(moved.fit_ns - to.FitOfRaw(raw0)), 1);
    EXPECT_LE(std::fabs(static_cast<long double>(moved.rate_fine) - rate_against(to)), 2.0L);
    const int64_t raw1 = raw0 + kSecond;
    const long double truth = realtime_at(raw1) - static_cast<long double>(to.FitOfRaw(raw1));
    EXPECT_LE(std::fabs(static_cast<long double>(moved.RealtimeMinusFitAt(to.FitOfRaw(raw1))) - truth), 2.0L);
    EXPECT_EQ(PointOnAnchor(p, from, from), p);
  }
}

TEST(FitTimebase, FollowsRawThroughEveryRateChangeAndTheStep) {
  const DisciplinedClock n = MakeNode(5);
  FitTimebase fit(n.SampleAt(kT0, true));
  const FitAnchor anchor = fit.anchor();
  EXPECT_EQ(anchor.raw_ns, n.raw.ReadAt(kT0));
  std::mt19937_64 rng(9);
  std::uniform_int_distribution<int64_t> within(1, kMs);
  int64_t worst = 0, worst_back = 0, worst_ahead = 0;
  bool crossed = false;
  for (int64_t t = kT0 + kMs; t < kT0 + 60 * kSecond; t += kMs) {
    fit.Add(n.SampleAt(t, true));
    if (!crossed && t > n.step_at + 10 * kMs) {
      // F took nothing of the 2 ms step: across it, F moved as RAW did.
      crossed = true;
      const int64_t a = n.step_at - 10 * kMs, b = n.step_at + 10 * kMs;
      const int64_t across = fit.FitOfRealtime(n.realtime.ReadAt(b)) - fit.FitOfRealtime(n.realtime.ReadAt(a));
      EXPECT_LE(std::llabs(across - (anchor.FitOfRaw(n.raw.ReadAt(b)) - anchor.FitOfRaw(n.raw.ReadAt(a)))), 3);
      EXPECT_GT(n.realtime.ReadAt(b) - n.realtime.ReadAt(a) - across, kMs) << "while REALTIME jumped";
    }
    if (t % (7 * kMs) != 0 || std::llabs(t - n.step_at) < 3 * kMs) continue;
    // A stamp taken within the last interval, and one not yet sampled past.
    const int64_t before = t - within(rng), ahead = t + within(rng);
    const int64_t truth = anchor.FitOfRaw(n.raw.ReadAt(before));
    worst = std::max<int64_t>(worst, std::llabs(fit.FitOfRealtime(n.realtime.ReadAt(before)) - truth));
    worst_back = std::max<int64_t>(worst_back, std::llabs(fit.RealtimeOfFit(truth) - n.realtime.ReadAt(before)));
    worst_ahead = std::max<int64_t>(
        worst_ahead, std::llabs(fit.FitOfRealtime(n.realtime.ReadAt(ahead)) - anchor.FitOfRaw(n.raw.ReadAt(ahead))));
  }
  EXPECT_LE(worst, 2) << "between samples that know the rate: the kink, and two floors";
  EXPECT_LE(worst_back, 2);
  EXPECT_LE(worst_ahead, 2) << "a millisecond along the newest rate; the wander bends it by < 0.1 ns";
  EXPECT_TRUE(crossed);
  EXPECT_EQ(fit.stats().steps, 1u);
  EXPECT_GT(fit.stats().extrapolated, 0u);
}

TEST(FitTimebase, WithoutTheKernelsRateTheChordsServeToTwoNanoseconds) {
  const DisciplinedClock n = MakeNode(6);
  FitTimebase fit(n.SampleAt(kT0, false));
  EXPECT_EQ(fit.anchor().rate_fine, 0) << "no rate known at the start: F runs at RAW's";
  for (int64_t t = kT0 + kMs; t < kT0 + 8 * kSecond; t += kMs) fit.Add(n.SampleAt(t, false));
  std::mt19937_64 rng(2);
  std::uniform_int_distribution<int64_t> instant(kT0 + kSecond, kT0 + 8 * kSecond - 2 * kMs);
  int64_t worst = 0;
  for (int i = 0; i < 5000; ++i) {
    const int64_t t = instant(rng);
    worst = std::max<int64_t>(
        worst, std::llabs(fit.FitOfRealtime(n.realtime.ReadAt(t)) - fit.anchor().FitOfRaw(n.raw.ReadAt(t))));
  }
  EXPECT_LE(worst, 2) << "0.5 ppm changes bend a 1 ms chord by 0.125 ns";
}

TEST(FitTimebase, GivesREALTIMEAndItsRateAgainstF) {
  const DisciplinedClock n = MakeNode(7);
  FitTimebase fit(n.SampleAt(kT0, true));
  for (int64_t t = kT0 + kMs; t < kT0 + 10 * kSecond; t += kMs) fit.Add(n.SampleAt(t, true));
  const FitAnchor anchor = fit.anchor();
  for (const int64_t t : {kT0 + 2 * kSecond + 5 * kMs + 17, kT0 + 7 * kSecond + 333 * kMs}) {
    const int64_t f = anchor.FitOfRaw(n.raw.ReadAt(t));
    const FitPoint p = fit.PointAt(f);
    EXPECT_EQ(p.fit_ns, f);
    EXPECT_LE(std::llabs(p.realtime_ns - n.realtime.ReadAt(t)), 2);
    // dREALTIME/dF = (1 + rate against RAW) / (1 + F's rate against RAW).
    const long double against_raw = 1 + static_cast<long double>(n.SampleAt(t, true).rate_fine) * 1e-15L;
    const long double expected = against_raw / (1 + anchor.rate_fine * 1e-15L) - 1;
    EXPECT_NEAR(static_cast<double>(p.rate_fine) * 1e-15, static_cast<double>(expected), 1e-13);
    // The point predicts REALTIME a millisecond on within the rate change there.
    const int64_t later = t + kMs;
    const int64_t f2 = anchor.FitOfRaw(n.raw.ReadAt(later));
    EXPECT_LE(std::llabs(f2 + p.RealtimeMinusFitAt(f2) - n.realtime.ReadAt(later)), 3);
  }
}

TEST(FitTimebase, AStampAtAREALTIMETheStepMadeAmbiguousIsCountedNotLost) {
  DisciplinedClock n = MakeNode(8);
  // Back by 3 ms this time: REALTIME reads the same instants twice.
  n.correction = ClockTrajectory(kT0, 0, -17'000'000'000);
  const int64_t step_at = kT0 + 5 * kSecond + 400'000;  // between two samples
  n.correction.ChangeAt(step_at, -17'000'000'000, static_cast<FineNs>(-3 * kMs) * kFinePerNs);
  n.realtime = ClockTrajectory::Sum(n.raw, n.correction);
  FitTimebase fit(n.SampleAt(kT0, true));
  for (int64_t t = kT0 + kMs; t < kT0 + 6 * kSecond; t += kMs) fit.Add(n.SampleAt(t, true));
  EXPECT_EQ(fit.stats().steps, 1u);
  const int64_t after = step_at + 300'000;  // before the first sample after the step
  const int64_t f = fit.FitOfRealtime(n.realtime.ReadAt(after));
  EXPECT_EQ(fit.stats().unmapped, 1u);
  // Read twice: mapped along the newest sample before that reading, 3 ms off at most.
  EXPECT_LE(std::llabs(f - fit.anchor().FitOfRaw(n.raw.ReadAt(after))), 3 * kMs + 1'000);
}

TEST(FitClock, ALinearVirtualClockIsItsOwnFitClock) {
  VirtualClockParams p;
  p.offset_ns = 5'000;
  p.drift_ppm = 3;
  p.t0_ns = ReadClockNs(CLOCK_REALTIME);
  const NodeClock node(p);
  FitClock fit(node);
  ASSERT_TRUE(fit.anchor().has_value());
  EXPECT_EQ(fit.anchor()->rate_fine, 0) << "undisciplined: REALTIME runs at RAW's rate";
  const int64_t real = ReadClockNs(CLOCK_REALTIME);
  EXPECT_EQ(fit.Ingest(real), node.Ingest(real));
  EXPECT_EQ(fit.Ingest(real + 500 * kMs), node.Ingest(real + 500 * kMs));
  EXPECT_LE(std::llabs(fit.ToReal(fit.Ingest(real)) - real), 1);
  const FitPoint point = fit.PointAt(node.Ingest(real));
  EXPECT_EQ(point.realtime_ns, point.fit_ns);
  EXPECT_EQ(point.rate_fine, 0);
}

TEST(FitClock, InREALTIMEModeItIsTheNodeClock) {
  const FitClock fit(NodeClock(), FitClockMode::kRealtime);
  EXPECT_FALSE(fit.anchor().has_value());
  const int64_t real = ReadClockNs(CLOCK_REALTIME);
  EXPECT_EQ(fit.Ingest(real), real);
  EXPECT_EQ(fit.ToReal(real), real);
  EXPECT_EQ(fit.PointAt(real), (FitPoint{real, real, 0}));
}

// Before its first reading the fit clock knows no REALTIME: a window
// centred there is not written (EdgeWindows::CloseWithoutRecordBefore).
// From the reading on it does; fitting in REALTIME it always does.
TEST(FitClock, KnowsREALTIMEOnlyFromItsFirstReading) {
  const FitClock fit;
  const int64_t first = fit.Now();
  EXPECT_GE(first, fit.FirstRead());
  EXPECT_GE(first + 5 * kMs, fit.FirstRead());
  EXPECT_LT(first - 100 * kMs, fit.FirstRead()) << "the window the agent started in, centred before it";
  const FitClock realtime(NodeClock(), FitClockMode::kRealtime);
  EXPECT_GE(ReadClockNs(CLOCK_REALTIME) - 100 * kMs, realtime.FirstRead());
  EXPECT_LE(fit.FirstRead(), first);
  EXPECT_GT(fit.FirstRead(), first - 100 * kMs);
  EXPECT_EQ(realtime.FirstRead(), INT64_MIN);
}

TEST(FitClock, TheKernelsFitClockRunsWithRawAndNearREALTIME) {
  FitClock fit;
  const int64_t mono = ReadClockNs(CLOCK_MONOTONIC);
  ASSERT_TRUE(fit.Poll(mono).sample.has_value());
  EXPECT_FALSE(fit.Poll(mono + 1).sample.has_value()) << "within the interval";
  const int64_t f0 = fit.Now(), raw0 = ReadClockNs(CLOCK_MONOTONIC_RAW);
  EXPECT_LT(std::llabs(f0 - ReadClockNs(CLOCK_REALTIME)), 10 * kMs) << "set to REALTIME at the start";
  const int64_t stamp = ReadClockNs(CLOCK_REALTIME);
  EXPECT_LT(std::llabs(fit.Ingest(stamp) - fit.Now()), 10 * kMs);
  // The stamp was newer than every sample: one was taken then, after it.
  EXPECT_GE(fit.stats().on_demand, 1u);
  EXPECT_EQ(fit.stats().extrapolated, 0u) << "mapped between two samples";
  const int64_t f1 = fit.Now(), raw1 = ReadClockNs(CLOCK_MONOTONIC_RAW);
  EXPECT_GE(f1, f0);
  EXPECT_LT(std::llabs((f1 - f0) - (raw1 - raw0)), kMs) << "F runs with RAW (at most 0.05 % apart)";
}

}  // namespace
}  // namespace chronolink
