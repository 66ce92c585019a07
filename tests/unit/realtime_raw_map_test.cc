// RealtimeRawMap (clock/realtime_raw_map.h) and TimebaseKnots
// (clock/timebase_knots.h): a disciplined REALTIME related to its
// free-running RAW from frequent samples, checked against the exact clocks
// (ClockTrajectory) a test bed node has: within a nanosecond or two while a
// daemon changes the rate every second, nothing mapped across a step, and
// about one knot per change of rate.
#include "clock/realtime_raw_map.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <random>
#include <vector>

#include "clock/clock_trajectory.h"
#include "clock/timebase_knots.h"
#include "tests/support/disciplined_clock.h"
#include "tests/support/property_cases.h"

namespace chronolink {
namespace {

constexpr int64_t kT0 = 1'795'320'926'000'000'000;
constexpr int64_t kMs = 1'000'000;
constexpr int64_t kSecond = 1'000'000'000;

using testing::DisciplinedClock;

// Rate changes of up to 0.1 ppm every second, a 3 ms step back at 30 s.
DisciplinedClock MakeNode(uint64_t seed) {
  return testing::MakeDisciplinedClock(seed, kT0, 100'000'000, -3 * kMs);
}

RealtimeRawMap Sampled(const DisciplinedClock& n, int64_t every_ns) {
  RealtimeRawMap map;
  for (int64_t t = kT0; t < kT0 + 60 * kSecond; t += every_ns) {
    map.Add({n.realtime.ReadAt(t), n.raw.ReadAt(t), 0});
  }
  return map;
}

TEST(RealtimeRawMap, FollowsADisciplinedClockToANanosecond) {
  const DisciplinedClock n = MakeNode(5);
  const RealtimeRawMap map = Sampled(n, 10 * kMs);
  EXPECT_EQ(map.breaks(), 1u) << "the step, and nothing else";
  std::mt19937_64 rng(9);
  std::uniform_int_distribution<int64_t> instant(kT0 + kSecond, kT0 + 59 * kSecond);
  int64_t worst = 0;
  size_t mapped = 0;
  for (int i = 0; i < 20'000; ++i) {
    const int64_t t = instant(rng);
    if (std::llabs(t - n.step_at) < 20 * kMs) continue;  // the interval of the step
    const auto raw = map.RawOf(n.realtime.ReadAt(t));
    ASSERT_TRUE(raw.has_value()) << t - kT0;
    worst = std::max<int64_t>(worst, std::llabs(*raw - n.raw.ReadAt(t)));
    const auto back = map.RealtimeOf(n.raw.ReadAt(t));
    ASSERT_TRUE(back.has_value());
    EXPECT_LE(std::llabs(*back - n.realtime.ReadAt(t)), 2) << t - kT0;
    ++mapped;
  }
  EXPECT_GT(mapped, 19'000u);
  EXPECT_LE(worst, 2) << "rate changes of 0.1 ppm bend a 10 ms interval by 0.25 ns, readings floor by 1";
}

TEST(RealtimeRawMap, NothingIsMappedAcrossAStepOrOutsideTheSamples) {
  const DisciplinedClock n = MakeNode(6);
  const RealtimeRawMap map = Sampled(n, 10 * kMs);
  // Past the sample after the step, the map answers again.
  const int64_t after = n.step_at + 15 * kMs;
  const auto raw = map.RawOf(n.realtime.ReadAt(after));
  ASSERT_TRUE(raw.has_value());
  EXPECT_LE(std::llabs(*raw - n.raw.ReadAt(after)), 2);
  // The clock stepped back 3 ms: the REALTIME it read in the 3 ms before the
  // step it read again after it. Those readings, and the interval of the
  // step, have no one answer.
  for (const int64_t t : {n.step_at - 1, n.step_at - 2 * kMs, n.step_at + 1, n.step_at + 2 * kMs}) {
    EXPECT_FALSE(map.RawOf(n.realtime.ReadAt(t)).has_value()) << t - n.step_at;
  }
  // Well before the step, the one answer there is.
  const int64_t before = n.step_at - 30 * kMs;
  ASSERT_TRUE(map.RawOf(n.realtime.ReadAt(before)).has_value());
  EXPECT_LE(std::llabs(*map.RawOf(n.realtime.ReadAt(before)) - n.raw.ReadAt(before)), 2);
  // RAW never steps: only the interval of the step itself has no answer.
  EXPECT_FALSE(map.RealtimeOf(n.raw.ReadAt(n.step_at + 1)).has_value());
  EXPECT_FALSE(map.RawOf(n.realtime.ReadAt(kT0) - 1).has_value()) << "before the first sample";
  EXPECT_FALSE(map.RawOf(n.realtime.ReadAt(kT0 + 61 * kSecond)).has_value()) << "after the last";
}

TEST(RealtimeRawMap, KeepsItsCapacityAndIgnoresSamplesOutOfOrder) {
  RealtimeRawMap map(4);
  for (int i = 0; i < 10; ++i) map.Add({kT0 + i * kMs, 5 * kSecond + i * kMs, 0});
  map.Add({kT0, 5 * kSecond, 0});  // earlier in RAW: ignored
  EXPECT_EQ(map.size(), 4u);
  EXPECT_FALSE(map.RawOf(kT0 + kMs).has_value()) << "forgotten";
  EXPECT_EQ(map.RawOf(kT0 + 8 * kMs + 500'000), 5 * kSecond + 8 * kMs + 500'000);
  int64_t bound = -1;
  map.Add({kT0 + 10 * kMs, 5 * kSecond + 10 * kMs, 40});
  EXPECT_TRUE(map.RawOf(kT0 + 9 * kMs + 1, &bound).has_value());
  EXPECT_EQ(bound, 40);
}

// RealtimeOf searches; the scan from the newest sample it replaced stays
// here as the reference. On generated samples (steps, slews, rates known or
// not, a capacity that drops the oldest) the two agree at every sample,
// between samples, across breaks and outside the samples.
std::optional<int64_t> RealtimeOfByScan(const RealtimeRawMap& map, int64_t raw_ns) {
  const auto& ss = map.samples();
  for (size_t i = ss.size(); i-- > 0;) {
    if (ss[i].raw_ns == raw_ns) return ss[i].realtime_ns;
    if (i == 0 || map.BreakBefore(i)) continue;
    if (ss[i - 1].raw_ns < raw_ns && raw_ns < ss[i].raw_ns) {
      // The map's own interpolation between the two: what is compared is
      // which pair (or none) answers.
      RealtimeRawMap pair;
      pair.Add(ss[i - 1]);
      pair.Add(ss[i]);
      return pair.RealtimeOf(raw_ns);
    }
  }
  return std::nullopt;
}

TEST(RealtimeRawMap, TheSearchAnswersAsTheScanFromTheNewestDid) {
  std::mt19937_64 rng(29);
  const int64_t rounds = trace::testing::CasesFromEnvironment(200);  // 100 under qemu
  for (int64_t round = 0; round < rounds; ++round) {
    RealtimeRawMap map(std::uniform_int_distribution<size_t>(1, 300)(rng));
    int64_t raw = 5'000 * kSecond, realtime = kT0;
    const int samples = std::uniform_int_distribution<int>(0, 400)(rng);
    for (int i = 0; i < samples; ++i) {
      const int64_t d_raw = std::uniform_int_distribution<int64_t>(1, 3 * kMs)(rng);
      raw += d_raw;
      realtime += d_raw + std::uniform_int_distribution<int64_t>(-200, 200)(rng);
      if (rng() % 40 == 0) realtime += std::uniform_int_distribution<int64_t>(-5 * kMs, 5 * kMs)(rng);  // a step
      const int64_t rate = rng() % 2 ? kRateUnknown : std::uniform_int_distribution<int64_t>(-1e11, 1e11)(rng);
      map.Add({realtime, raw - (rng() % 8 == 0 ? d_raw : 0), std::uniform_int_distribution<int64_t>(0, 50)(rng), rate});
    }
    const auto& ss = map.samples();
    std::vector<int64_t> queries = {0, INT64_MAX, raw + 1, 5'000 * kSecond};
    for (size_t i = 0; i < ss.size(); ++i) {
      queries.push_back(ss[i].raw_ns);
      queries.push_back(ss[i].raw_ns - 1);
      queries.push_back(ss[i].raw_ns + 1);
      if (i > 0) queries.push_back(ss[i - 1].raw_ns + (ss[i].raw_ns - ss[i - 1].raw_ns) / 2);
    }
    for (int64_t q : queries)
      ASSERT_EQ(map.RealtimeOf(q), RealtimeOfByScan(map, q)) << "round " << round << " raw " << q;
  }
}

TEST(TimebaseKnots, AKnotPerRateChangeAndTheClockWithinThreeNanoseconds) {
  const DisciplinedClock n = MakeNode(7);
  TimebaseKnots knots(/*tolerance_ns=*/1);
  for (int64_t t = kT0; t < kT0 + 60 * kSecond; t += kMs) {
    knots.Add({n.realtime.ReadAt(t), n.raw.ReadAt(t), 0});
  }
  // 59 rate changes and a step in 60 s; both readings floor to the ns,
  // which within a 1 ns tolerance costs a change up to four knots, not 1 000.
  EXPECT_GE(knots.knots().size(), 40u);
  EXPECT_LE(knots.knots().size(), 240u) << "the 60 000 samples were not compressed";
  size_t steps = 0;
  for (const auto& k : knots.knots()) steps += k.after_step;
  EXPECT_EQ(steps, 1u);
  std::mt19937_64 rng(3);
  std::uniform_int_distribution<int64_t> instant(kT0, kT0 + 60 * kSecond - 2 * kMs);
  int64_t worst = 0;
  for (int i = 0; i < 20'000; ++i) {
    const int64_t t = instant(rng);
    if (std::llabs(t - n.step_at) < 2 * kMs) continue;
    const auto rt = knots.RealtimeAt(n.raw.ReadAt(t));
    ASSERT_TRUE(rt.has_value()) << t - kT0;
    worst = std::max<int64_t>(worst, std::llabs(*rt - n.realtime.ReadAt(t)));
  }
  // Twice the tolerance (chords), and a nanosecond of the readings' floor.
  EXPECT_LE(worst, 3);
  // Across the step there is no answer; before the first sample neither.
  const TimebaseKnot* after_step = nullptr;
  for (const auto& k : knots.knots()) after_step = k.after_step ? &k : after_step;
  ASSERT_NE(after_step, nullptr);
  EXPECT_FALSE(knots.RealtimeAt(after_step->raw_ns - 1).has_value());
  EXPECT_EQ(knots.RealtimeAt(after_step->raw_ns), after_step->realtime_ns);
  EXPECT_FALSE(knots.RealtimeAt(n.raw.ReadAt(kT0) - 1).has_value());
  // Dropping the past keeps what the rest starts from.
  const size_t before = knots.knots().size();
  const size_t dropped = knots.DropBefore(n.raw.ReadAt(kT0 + 30 * kSecond));
  EXPECT_EQ(knots.knots().size(), before - dropped);
  EXPECT_TRUE(knots.RealtimeAt(n.raw.ReadAt(kT0 + 45 * kSecond)).has_value());
}

// A clock no daemon bends: a knot every 10 s all the same, so that what a
// reader knows (the leader's copy, the trace tools) reaches past the start.
TEST(TimebaseKnots, AClockNothingBendsStillHasAKnotEveryTenSeconds) {
  TimebaseKnots knots(1);
  const int64_t raw0 = 5'000'000'000;
  for (int64_t i = 0; i <= 35'000; ++i) knots.Add({kT0 + i * (kMs + 20), raw0 + i * kMs, 0, 20'000'000'000});
  ASSERT_EQ(knots.knots().size(), 4u) << "at 0, 10, 20 and 30 s";
  EXPECT_EQ(knots.knots()[3].raw_ns, raw0 + 30'000 * kMs);
  EXPECT_EQ(knots.RealtimeAt(raw0 + 12'345 * kMs + 7), kT0 + 12'345 * (kMs + 20) + 7);
  const auto excerpt = knots.Covering(raw0 + 25'000 * kMs, raw0 + 27'000 * kMs, 64);
  ASSERT_TRUE(excerpt.has_value());
  EXPECT_FALSE(excerpt->last_provisional) << "decided knots on both sides";
  // The agent stopping decides the open segment at its newest sample: a
  // reader of the written knots knows the clock to the end, not to 30 s.
  const size_t decided = knots.knots().size();
  knots.EndOpenSegment();
  ASSERT_EQ(knots.knots().size(), decided + 1);
  EXPECT_EQ(knots.knots().back().raw_ns, raw0 + 35'000 * kMs);
  EXPECT_EQ(knots.knots().back().realtime_ns, kT0 + 35'000 * (kMs + 20));
  EXPECT_FALSE(knots.knots().back().after_step);
  knots.EndOpenSegment();
  EXPECT_EQ(knots.knots().size(), decided + 1) << "nothing more to decide";
  knots.Add({kT0 + 35'001 * (kMs + 20), raw0 + 35'001 * kMs, 0, 20'000'000'000});
  EXPECT_EQ(knots.RealtimeAt(raw0 + 35'001 * kMs), kT0 + 35'001 * (kMs + 20)) << "a later sample goes on from it";
}

// What a window summary carries: the knots from the one holding the window's
// start through the first at or after its end, or the open segment's newest
// sample; and nothing across a step or beyond what is kept.
TEST(TimebaseKnots, AnExcerptCoversAWindowFromTheKnotHoldingItsStart) {
  TimebaseKnots knots(1);
  const int64_t raw0 = 5'000'000'000;
  // Rate +100 ppm from 0, -200 ppm from 300 ms, +50 ppm from 700 ms, with the
  // kernel's rate in each sample: knots exactly at the changes.
  auto realtime_at = [&](int64_t i_ms) {
    const int64_t us = i_ms * 1'000;
    if (i_ms <= 300) return kT0 + i_ms * kMs + us / 10;
    if (i_ms <= 700) return kT0 + i_ms * kMs + 30'000 - (i_ms - 300) * 200;
    return kT0 + i_ms * kMs + 30'000 - 80'000 + (i_ms - 700) * 50;
  };
  auto rate_at = [](int64_t i_ms) -> int64_t { return i_ms < 300 ? 100'000'000'000 : i_ms < 700 ? -200'000'000'000 : 50'000'000'000; };
  for (int64_t i = 0; i <= 1000; ++i) knots.Add({realtime_at(i), raw0 + i * kMs, 0, rate_at(i)});
  ASSERT_EQ(knots.knots().size(), 3u);
  const auto mid = knots.Covering(raw0 + 100 * kMs, raw0 + 500 * kMs, 64);
  ASSERT_TRUE(mid.has_value());
  ASSERT_EQ(mid->knots.size(), 3u) << "the one holding the start, the change inside, the first after the end";
  EXPECT_EQ(mid->knots[0].raw_ns, raw0);
  EXPECT_EQ(mid->knots[1].raw_ns, raw0 + 300 * kMs);
  EXPECT_EQ(mid->knots[2].raw_ns, raw0 + 700 * kMs);
  EXPECT_FALSE(mid->last_provisional);
  const auto open = knots.Covering(raw0 + 600 * kMs, raw0 + 900 * kMs, 64);
  ASSERT_TRUE(open.has_value());
  ASSERT_EQ(open->knots.size(), 3u);
  EXPECT_EQ(open->knots.back().raw_ns, raw0 + 1000 * kMs) << "the open segment's newest sample";
  EXPECT_EQ(open->knots.back().realtime_ns, realtime_at(1000));
  EXPECT_TRUE(open->last_provisional);
  EXPECT_FALSE(knots.Covering(raw0 + 600 * kMs, raw0 + 1001 * kMs, 64)) << "beyond the newest sample";
  EXPECT_FALSE(knots.Covering(raw0 - 1, raw0 + 100 * kMs, 64)) << "before the first knot kept";
  EXPECT_FALSE(knots.Covering(raw0 + 100 * kMs, raw0 + 800 * kMs, 3)) << "more knots than allowed";
  // A step inside: no excerpt across it.
  knots.Add({realtime_at(1001) + 5'000'000, raw0 + 1001 * kMs, 0, rate_at(1001)});
  knots.Add({realtime_at(1002) + 5'000'000, raw0 + 1002 * kMs, 0, rate_at(1002)});
  EXPECT_FALSE(knots.Covering(raw0 + 900 * kMs, raw0 + 1002 * kMs, 64));
  EXPECT_TRUE(knots.Covering(raw0 + 900 * kMs, raw0 + 1000 * kMs, 64).has_value());
}

// chronyd slewing an offset changes the rate by up to hundreds of ppm for a
// fraction of a second. Sampled only every 50 ms (an idle agent loop), a
// chord misses that by up to rate change x 50 ms / 4; with the rate the
// kernel reports in each sample, the knot goes where the rate changed.
TEST(TimebaseKnots, WithTheKernelsRateEachKnotGoesWhereTheRateChanged) {
  OscillatorParams p;
  p.frequency_ppm = -8;
  p.white_fm_adev_1s = 5e-9;
  p.seed = 11;
  const ClockTrajectory raw = OscillatorTrajectory(p, kT0, kT0 + 70 * kSecond);
  std::mt19937_64 rng(12);
  std::uniform_int_distribution<int64_t> slew(-200'000'000'000, 200'000'000'000);  // ±200 ppm
  std::uniform_int_distribution<int64_t> when(0, 999'999'999);
  ClockTrajectory correction(kT0, 0, 8'000'000'000);
  for (int s = 1; s < 60; ++s) correction.ChangeAt(kT0 + s * kSecond + when(rng), 8'000'000'000 + slew(rng));
  const ClockTrajectory realtime = ClockTrajectory::Sum(raw, correction);
  auto sample = [&](int64_t t, bool with_rate) {
    ClockPairSample c{realtime.ReadAt(t), raw.ReadAt(t), 0};
    if (with_rate) {
      c.rate_fine = static_cast<int64_t>(static_cast<__int128>(correction.SlopeAt(t)) * kFinePerNs / raw.SlopeAt(t));
    }
    return c;
  };
  auto worst_error = [&](bool with_rate, size_t* knot_count) {
    TimebaseKnots knots(1);
    for (int64_t t = kT0; t < kT0 + 60 * kSecond; t += 50 * kMs) knots.Add(sample(t, with_rate));
    *knot_count = knots.knots().size();
    int64_t worst = 0;
    std::mt19937_64 pick(13);
    std::uniform_int_distribution<int64_t> instant(kT0, kT0 + 59 * kSecond);
    for (int i = 0; i < 20'000; ++i) {
      const int64_t t = instant(pick);
      const auto rt = knots.RealtimeAt(raw.ReadAt(t));
      if (!rt) return int64_t{-1};
      worst = std::max<int64_t>(worst, std::llabs(*rt - realtime.ReadAt(t)));
    }
    return worst;
  };
  size_t with_knots = 0, without_knots = 0;
  const int64_t with = worst_error(true, &with_knots);
  const int64_t without = worst_error(false, &without_knots);
  EXPECT_GE(with, 0);
  EXPECT_LE(with, 4) << "knots where the rate changed";
  EXPECT_GT(without, 100) << "the chords of samples 50 ms apart miss slews of up to 400 ppm";
  EXPECT_LE(with_knots, 3u * 60u) << "about one knot per change";
}

}  // namespace
}  // namespace chronolink

namespace chronolink {
namespace {

// A daemon's fastest slew is not a step; with the rates known, a step of a
// few µs is one however fast the slew around it.
TEST(SteppedBetween, AFastSlewIsNotAStepAndWithTheRatesASmallStepIs) {
  const int64_t ms = 1'000'000;
  const ClockPairSample a{kT0, 5 * kSecond, 0, 80'000'000'000'000};  // slewing at +8 %
  ClockPairSample b{kT0 + ms + 80'000, 5 * kSecond + ms, 0, 80'000'000'000'000};
  EXPECT_FALSE(SteppedBetween(a, b, kMaxSlewRate)) << "chronyd's maxslewrate";
  b.realtime_ns += 5'000;  // and a 5 µs step
  EXPECT_TRUE(SteppedBetween(a, b, kMaxSlewRate)) << "the rates cannot explain 5 µs";
  // The rate changed from 8 % to 0 somewhere between: anything between the two lines.
  ClockPairSample c{kT0 + ms + 30'000, 5 * kSecond + ms, 0, 0};
  EXPECT_FALSE(SteppedBetween(a, c, kMaxSlewRate));
  // Without the rates only a rate beyond the fastest slew is a step.
  ClockPairSample a2 = a, b2{kT0 + ms + 85'000, 5 * kSecond + ms, 0, kRateUnknown};
  a2.rate_fine = kRateUnknown;
  EXPECT_FALSE(SteppedBetween(a2, b2, kMaxSlewRate));
  b2.realtime_ns = kT0 + ms + 200'000;  // 20 %
  EXPECT_TRUE(SteppedBetween(a2, b2, kMaxSlewRate));
  b2.realtime_ns = kT0 - 3 * ms;  // back
  EXPECT_TRUE(SteppedBetween(a2, b2, kMaxSlewRate));
}

}  // namespace
}  // namespace chronolink
