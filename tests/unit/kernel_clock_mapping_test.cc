#include "clock/kernel_clock_mapping.h"

#include <gtest/gtest.h>
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>

#include "clock/clock_reader.h"

namespace chronolink {
namespace {

constexpr int64_t kMs = 1'000'000;
constexpr int64_t kStartMono = 5'000 * kMs;                     // 5 s after boot
constexpr int64_t kBaseOffset = 1'790'000'000'000'000'000LL;     // REALTIME - MONOTONIC

// A synthetic machine. True time is MONOTONIC; REALTIME = MONOTONIC +
// offset(MONOTONIC), TAI = REALTIME + tai_minus_real. Every read takes
// `pre` ns before it latches and `post` ns after, plus a random extra of up
// to `jitter` ns on each side.
struct World {
  int64_t mono = kStartMono;
  std::function<int64_t(int64_t)> offset = [](int64_t) { return kBaseOffset; };
  int64_t tai_minus_real = 0;
  int64_t pre = 10;
  int64_t post = 10;
  int64_t real_pre = -1;  // >= 0: overrides pre/post for REALTIME reads
  int64_t real_post = -1;
  int64_t jitter = 0;
  std::mt19937_64 rng{42};

  int64_t Extra() {
    if (jitter <= 0) return 0;
    return std::uniform_int_distribution<int64_t>(0, jitter)(rng);
  }
  int64_t Read(clockid_t id) {
    const bool real = id == CLOCK_REALTIME;
    mono += (real && real_pre >= 0 ? real_pre : pre) + Extra();
    const int64_t at = mono;
    mono += (real && real_post >= 0 ? real_post : post) + Extra();
    return Truth(id, at);
  }
  int64_t Truth(clockid_t id, int64_t at) const {
    switch (id) {
      case CLOCK_MONOTONIC: return at;
      case CLOCK_REALTIME: return at + offset(at);
      case CLOCK_TAI: return at + offset(at) + tai_minus_real;
      default: return 0;
    }
  }
  int64_t RealAtMono(int64_t m) const { return m + offset(m); }
  ClockReadFn Reader() {
    return [this](clockid_t id) { return Read(id); };
  }
};

KernelClockMappingOptions SyntheticOptions() {
  KernelClockMappingOptions o;
  o.read_granularity_ns = 1;
  return o;
}

// Samples every `period` of world time, `count` times.
void SampleEvery(World& w, KernelClockMapping& m, int64_t period, int count) {
  for (int i = 0; i < count; ++i) {
    m.Sample(w.mono);
    w.mono += period;
  }
}

void ExpectCovers(const ConvertedStamp& c, int64_t truth, const char* what) {
  ASSERT_TRUE(c.ok) << what;
  EXPECT_LE(c.realtime_ns - truth, c.error_ns) << what;
  EXPECT_LE(truth - c.realtime_ns, c.error_ns) << what;
}

TEST(KernelClockMapping, NoSamplesMeansNoConversion) {
  World w;
  KernelClockMapping m(SyntheticOptions(), w.Reader());
  EXPECT_FALSE(m.MonotonicToRealtime(kStartMono).ok);
  EXPECT_FALSE(m.TaiToRealtime(kStartMono).ok);
  EXPECT_EQ(m.last_bracket_ns(), -1);
}

TEST(KernelClockMapping, ExactBracketArithmetic) {
  // Every read latches 10 ns after it starts and returns 10 ns later: the
  // bracket is 40 ns wide and centred on the REALTIME read.
  World w;
  KernelClockMapping m(SyntheticOptions(), w.Reader());
  m.Sample(w.mono);
  EXPECT_EQ(m.last_bracket_ns(), 40);
  EXPECT_EQ(m.last_tai_bracket_ns(), 40);
  ASSERT_EQ(m.monotonic_track().samples().size(), 1u);
  const ClockOffsetSample& s = m.monotonic_track().samples().back();
  EXPECT_EQ(s.offset_ns, kBaseOffset);
  EXPECT_EQ(s.error_ns, 21);  // half of 40 + 1 ns granularity
  // At the sample itself the answer is exact and the bound is the sample's.
  const ConvertedStamp c = m.MonotonicToRealtime(s.ref_ns);
  ASSERT_TRUE(c.ok);
  EXPECT_EQ(c.realtime_ns, s.ref_ns + kBaseOffset);
  EXPECT_EQ(c.error_ns, 21);
}

TEST(KernelClockMapping, BoundIsAttainedByAnAsymmetricBracket) {
  // The REALTIME read latches right at the start of the bracket: the
  // midpoint is off by half the width, which the bound must cover, just.
  World w;
  w.pre = 0;
  w.post = 0;
  w.real_pre = 0;
  w.real_post = 40;
  KernelClockMapping m(SyntheticOptions(), w.Reader());
  m.Sample(w.mono);
  const ClockOffsetSample& s = m.monotonic_track().samples().back();
  EXPECT_EQ(s.bracket_ns, 40);
  EXPECT_EQ(s.offset_ns, kBaseOffset - 20);
  EXPECT_EQ(s.error_ns, 21);
  const ConvertedStamp c = m.MonotonicToRealtime(s.ref_ns);
  ExpectCovers(c, w.RealAtMono(s.ref_ns), "asymmetric");
  EXPECT_GE(20, c.error_ns - 1);  // actual error 20 of a bound of 21
}

TEST(KernelClockMapping, ConstantOffsetWithJitterStaysWithinTightBound) {
  World w;
  w.jitter = 30;
  KernelClockMapping m(SyntheticOptions(), w.Reader());
  SampleEvery(w, m, 20 * kMs, 40);
  EXPECT_EQ(m.monotonic_steps(), 0u);
  EXPECT_EQ(m.samples_rejected(), 0u);
  const auto& samples = m.monotonic_track().samples();
  int64_t worst_ratio_permille = 0;
  int64_t max_bracket = 0;
  for (const auto& s : samples) max_bracket = std::max(max_bracket, s.bracket_ns);
  for (size_t i = 0; i + 1 < samples.size(); ++i) {
    for (int k = 0; k <= 8; ++k) {
      const int64_t t = samples[i].ref_ns + (samples[i + 1].ref_ns - samples[i].ref_ns) * k / 8;
      const ConvertedStamp c = m.MonotonicToRealtime(t);
      ExpectCovers(c, w.RealAtMono(t), "interpolated");
      // Tight: at most half the widest bracket, the granularity, the
      // curvature allowance (1 ppm of a quarter of 20 ms = 5 ns) and rounding.
      EXPECT_LE(c.error_ns, (max_bracket + 1) / 2 + 1 + 6 + 1);
      worst_ratio_permille =
          std::max(worst_ratio_permille,
                   std::abs(c.realtime_ns - w.RealAtMono(t)) * 1000 / c.error_ns);
    }
  }
  // The errors actually made are a real fraction of the bound, not noise
  // under a huge umbrella.
  EXPECT_GT(worst_ratio_permille, 100);
}

TEST(KernelClockMapping, FollowsAConstantSlewExactly) {
  // REALTIME slews at +200 ppm against MONOTONIC (a synthetic clock; Linux
  // slews both together) from the first read on.
  World w;
  const int64_t t0 = w.mono;
  w.offset = [t0](int64_t t) { return kBaseOffset + (t - t0) / 5'000; };  // 200 ppm
  KernelClockMapping m(SyntheticOptions(), w.Reader());
  SampleEvery(w, m, 20 * kMs, 20);
  EXPECT_EQ(m.monotonic_steps(), 0u);
  const auto& samples = m.monotonic_track().samples();
  for (size_t i = 0; i + 1 < samples.size(); ++i) {
    const int64_t t = (samples[i].ref_ns + samples[i + 1].ref_ns) / 2;
    const ConvertedStamp c = m.MonotonicToRealtime(t);
    ExpectCovers(c, w.RealAtMono(t), "slew interpolation");
    EXPECT_LE(std::abs(c.realtime_ns - w.RealAtMono(t)), 3);  // exact up to rounding
    EXPECT_LE(c.error_ns, 30);
  }
  // Past the newest sample the slope carries on.
  const int64_t t = samples.back().ref_ns + 30 * kMs;
  const ConvertedStamp c = m.MonotonicToRealtime(t);
  ExpectCovers(c, w.RealAtMono(t), "slew extrapolation");
  EXPECT_LE(std::abs(c.realtime_ns - w.RealAtMono(t)), 3);
}

TEST(KernelClockMapping, ExtrapolationErrorGrowsWithTheGap) {
  World w;
  const int64_t t0 = w.mono;
  w.offset = [t0](int64_t t) { return kBaseOffset - (t - t0) / 20'000; };  // -50 ppm
  KernelClockMapping m(SyntheticOptions(), w.Reader());
  SampleEvery(w, m, 20 * kMs, 10);
  const int64_t newest = m.monotonic_track().samples().back().ref_ns;
  int64_t previous = 0;
  for (int64_t gap : {int64_t{0}, 1 * kMs, 10 * kMs, 100 * kMs, 500 * kMs, 1000 * kMs}) {
    const ConvertedStamp c = m.MonotonicToRealtime(newest + gap);
    ExpectCovers(c, w.RealAtMono(newest + gap), "extrapolation");
    if (gap > 0) {
      EXPECT_GT(c.error_ns, previous) << gap;
    }
    previous = c.error_ns;
  }
  // 1 ppm of rate change over 1 s alone is 1 us.
  EXPECT_GT(previous, 1'000);
  // Beyond max_extrapolation_ns (1 s) there is no answer.
  EXPECT_FALSE(m.MonotonicToRealtime(newest + 1001 * kMs).ok);
}

TEST(KernelClockMapping, SingleSampleExtrapolatesFlatWithTheSlewAllowance) {
  World w;
  KernelClockMapping m(SyntheticOptions(), w.Reader());
  m.Sample(w.mono);
  const ClockOffsetSample& s = m.monotonic_track().samples().back();
  const ConvertedStamp c = m.MonotonicToRealtime(s.ref_ns + 10 * kMs);
  ASSERT_TRUE(c.ok);
  EXPECT_EQ(c.realtime_ns, s.ref_ns + 10 * kMs + s.offset_ns);
  EXPECT_EQ(c.error_ns, s.error_ns + 5'000);  // 500 ppm of 10 ms
}

TEST(KernelClockMapping, RealtimeStepSplitsTheHistory) {
  World w;
  const int64_t step_at = kStartMono + 105 * kMs;  // between samples 5 and 6
  w.offset = [step_at](int64_t t) { return kBaseOffset + (t >= step_at ? 5 * kMs : 0); };
  KernelClockMapping m(SyntheticOptions(), w.Reader());
  SampleEvery(w, m, 20 * kMs, 12);
  EXPECT_EQ(m.monotonic_steps(), 1u);
  const auto& samples = m.monotonic_track().samples();
  size_t first_after = 0;
  while (samples[first_after].ref_ns < step_at) ++first_after;
  ASSERT_GT(first_after, 1u);
  EXPECT_NE(samples[first_after].segment, samples[first_after - 1].segment);

  // Before the step: the old offset.
  const int64_t before = (samples[0].ref_ns + samples[1].ref_ns) / 2;
  ExpectCovers(m.MonotonicToRealtime(before), w.RealAtMono(before), "before step");
  // In the gap that contains the step: which side is unknown, no answer.
  EXPECT_FALSE(m.MonotonicToRealtime(step_at - 1).ok);
  EXPECT_FALSE(m.MonotonicToRealtime(step_at + 1).ok);
  // After it: the new offset.
  const int64_t after = (samples[first_after].ref_ns + samples[first_after + 1].ref_ns) / 2;
  const ConvertedStamp c = m.MonotonicToRealtime(after);
  ExpectCovers(c, w.RealAtMono(after), "after step");
  EXPECT_LE(c.error_ns, 30);
  // TAI moved with REALTIME: REALTIME - TAI did not change, no TAI step.
  EXPECT_EQ(m.tai_steps(), 0u);
}

TEST(KernelClockMapping, BackwardStepToo) {
  World w;
  const int64_t step_at = kStartMono + 65 * kMs;
  w.offset = [step_at](int64_t t) { return kBaseOffset - (t >= step_at ? 700 : 0); };
  KernelClockMapping m(SyntheticOptions(), w.Reader());
  SampleEvery(w, m, 20 * kMs, 8);
  EXPECT_EQ(m.monotonic_steps(), 1u);  // even a 700 ns step is seen
  EXPECT_FALSE(m.MonotonicToRealtime(step_at).ok);
  const int64_t late = m.monotonic_track().samples().back().ref_ns - 5 * kMs;
  ExpectCovers(m.MonotonicToRealtime(late), w.RealAtMono(late), "after backward step");
}

TEST(KernelClockMapping, RateChangeBeyondTheAllowanceIsADiscontinuity) {
  // The slew starts mid-way at 50 ppm: with the default 1 ppm allowance the
  // history is split; with a 100 ppm allowance it is followed within bounds.
  const int64_t bend = kStartMono + 100 * kMs;
  auto offset = [bend](int64_t t) { return kBaseOffset + (t > bend ? (t - bend) / 20'000 : 0); };
  {
    World w;
    w.offset = offset;
    KernelClockMapping m(SyntheticOptions(), w.Reader());
    SampleEvery(w, m, 20 * kMs, 15);
    EXPECT_GE(m.monotonic_steps(), 1u);
    // The history splits in the one sampling gap that holds the bend: there
    // (which side is unknown) conversion is refused; everywhere else, from
    // the first sample to 20 ms past the newest, it must succeed and cover
    // the truth. 15 samples 20 ms apart, checked every 1 ms: about 280 of
    // the 300 instants convert, on both sides of the bend.
    const auto& samples = m.monotonic_track().samples();
    size_t split = 1;
    while (split < samples.size() && samples[split].segment == samples[split - 1].segment) ++split;
    ASSERT_LT(split, samples.size()) << "the bend must split the history";
    const int64_t gap_from = samples[split - 1].ref_ns;
    const int64_t gap_to = samples[split].ref_ns;
    EXPECT_LE(gap_to - gap_from, 21 * kMs);
    int converted_before = 0, converted_after = 0, instants = 0;
    for (int64_t t = samples.front().ref_ns; t < w.mono; t += kMs) {
      ++instants;
      const ConvertedStamp c = m.MonotonicToRealtime(t);
      if (t > gap_from && t < gap_to) {
        EXPECT_FALSE(c.ok) << "inside the split's gap at " << t;
        continue;
      }
      ExpectCovers(c, w.RealAtMono(t), "split");
      if (!c.ok) continue;
      if (t < gap_to) {
        ++converted_before;
      } else {
        ++converted_after;
      }
    }
    EXPECT_GE(converted_before, 95) << "of " << instants;  // ~100 ms before the bend
    EXPECT_GE(converted_after, 175) << "of " << instants;  // 120 ms to 300 ms
  }
  {
    World w;
    w.offset = offset;
    KernelClockMappingOptions o = SyntheticOptions();
    o.track.max_rate_change_ppb = 100'000;
    KernelClockMapping m(o, w.Reader());
    SampleEvery(w, m, 20 * kMs, 15);
    EXPECT_EQ(m.monotonic_steps(), 0u);
    const int64_t first = m.monotonic_track().samples().front().ref_ns;
    const int64_t last = m.monotonic_track().samples().back().ref_ns;
    for (int64_t t = first; t < last + 50 * kMs; t += kMs) {
      ExpectCovers(m.MonotonicToRealtime(t), w.RealAtMono(t), "followed");
    }
  }
}

TEST(KernelClockMapping, TaiUsesItsOwnMeasuredOffset) {
  // Never TAI = UTC + 37 s: whatever the kernel's TAI offset is, it is measured.
  for (int64_t tai_minus_real : {int64_t{0}, int64_t{37'000'000'000}}) {
    World w;
    w.tai_minus_real = tai_minus_real;
    KernelClockMapping m(SyntheticOptions(), w.Reader());
    SampleEvery(w, m, 20 * kMs, 5);
    const auto& samples = m.tai_track().samples();
    ASSERT_EQ(samples.size(), 5u);
    EXPECT_EQ(samples.back().offset_ns, -tai_minus_real);
    const int64_t mono = kStartMono + 30 * kMs;
    const int64_t tai = w.Truth(CLOCK_TAI, mono);
    ExpectCovers(m.TaiToRealtime(tai), w.RealAtMono(mono), "tai");
  }
}

TEST(KernelClockMapping, TaiOffsetChangeIsAStepOfTheTaiTrackOnly) {
  World w;
  KernelClockMapping m(SyntheticOptions(), w.Reader());
  SampleEvery(w, m, 20 * kMs, 4);
  w.tai_minus_real = 1'000'000'000;  // adjtimex(ADJ_TAI) by one second
  SampleEvery(w, m, 20 * kMs, 4);
  EXPECT_EQ(m.tai_steps(), 1u);
  EXPECT_EQ(m.monotonic_steps(), 0u);
  const int64_t mono = w.mono - 30 * kMs;
  ExpectCovers(m.TaiToRealtime(w.Truth(CLOCK_TAI, mono)), w.RealAtMono(mono), "new tai offset");
}

TEST(KernelClockMapping, WideBracketsAreDropped) {
  World w;
  w.post = 50'000;  // preempted inside every read
  KernelClockMapping m(SyntheticOptions(), w.Reader());
  m.Sample(w.mono);
  EXPECT_GT(m.last_bracket_ns(), 20'000);
  EXPECT_EQ(m.samples_rejected(), 2u);
  EXPECT_FALSE(m.MonotonicToRealtime(w.mono).ok);
}

TEST(KernelClockMapping, OlderThanHistoryIsRefused) {
  World w;
  KernelClockMappingOptions o = SyntheticOptions();
  o.track.history = 8;
  KernelClockMapping m(o, w.Reader());
  SampleEvery(w, m, 20 * kMs, 20);
  EXPECT_EQ(m.monotonic_track().samples().size(), 8u);
  EXPECT_FALSE(m.MonotonicToRealtime(kStartMono + kMs).ok);
  EXPECT_TRUE(m.MonotonicToRealtime(m.monotonic_track().samples().front().ref_ns).ok);
}

TEST(KernelClockMapping, MinIntervalRateLimits) {
  World w;
  KernelClockMappingOptions o = SyntheticOptions();
  o.min_interval_ns = 10 * kMs;
  KernelClockMapping m(o, w.Reader());
  m.Sample(0);
  m.Sample(5 * kMs);
  m.Sample(10 * kMs);
  EXPECT_EQ(m.samples_taken(), 2u);
}

TEST(ClockOffsetTrack, TaiAxisGoingBackwardsStartsASegment) {
  ClockOffsetTrack track;
  EXPECT_FALSE(track.Add({1'000'000, 0, 20, 40, 0}));
  EXPECT_FALSE(track.Add({21'000'000, 0, 20, 40, 0}));
  EXPECT_FALSE(track.Add({21'000'000, 5, 20, 40, 0}));  // duplicate, ignored
  EXPECT_EQ(track.samples().size(), 2u);
  EXPECT_TRUE(track.Add({500'000, 0, 20, 40, 0}));  // the axis stepped back
  EXPECT_EQ(track.steps(), 1u);
  // The newest segment wins for values it covers or extrapolates to.
  const ConvertedStamp c = track.Convert(700'000);
  ASSERT_TRUE(c.ok);
  EXPECT_EQ(c.realtime_ns, 700'000);
}

// --- real clocks -----------------------------------------------------------

TEST(KernelClockMappingRealClocks, MonotonicStampMatchesRealtime) {
  KernelClockMapping m;
  for (int i = 0; i < 5; ++i) {
    m.Sample(ReadClockNs(CLOCK_MONOTONIC));
    timespec pause{0, 1'000'000};
    nanosleep(&pause, nullptr);
  }
  ASSERT_GT(m.last_bracket_ns(), 0);
  std::printf("bracket mono->real->mono %lld ns, tai->real->tai %lld ns, granularity %lld ns\n",
              static_cast<long long>(m.last_bracket_ns()),
              static_cast<long long>(m.last_tai_bracket_ns()),
              static_cast<long long>(m.read_granularity_ns()));

  // A stamp between two samples is interpolated; REALTIME read just before
  // and just after the stamp brackets the truth.
  const int64_t real_before = ReadClockNs(CLOCK_REALTIME);
  const int64_t mono = ReadClockNs(CLOCK_MONOTONIC);
  const int64_t real_after = ReadClockNs(CLOCK_REALTIME);
  m.Sample(ReadClockNs(CLOCK_MONOTONIC));
  const ConvertedStamp c = m.MonotonicToRealtime(mono);
  ASSERT_TRUE(c.ok);
  std::printf("interpolated error bound %lld ns\n", static_cast<long long>(c.error_ns));
  EXPECT_GE(c.realtime_ns, real_before - c.error_ns);
  EXPECT_LE(c.realtime_ns, real_after + c.error_ns);
  EXPECT_LT(c.error_ns, 50'000);

  // A fresh stamp, extrapolated, compared with REALTIME read right after.
  const int64_t now_mono = ReadClockNs(CLOCK_MONOTONIC);
  const int64_t now_real = ReadClockNs(CLOCK_REALTIME);
  const ConvertedStamp e = m.MonotonicToRealtime(now_mono);
  ASSERT_TRUE(e.ok);
  EXPECT_LT(std::abs(e.realtime_ns - now_real), 50'000);
}

TEST(KernelClockMappingRealClocks, TaiStampMatchesRealtime) {
  KernelClockMapping m;
  m.Sample(ReadClockNs(CLOCK_MONOTONIC));
  const int64_t tai = ReadClockNs(CLOCK_TAI);
  const int64_t real = ReadClockNs(CLOCK_REALTIME);
  m.Sample(ReadClockNs(CLOCK_MONOTONIC));
  const ConvertedStamp c = m.TaiToRealtime(tai);
  ASSERT_TRUE(c.ok);
  EXPECT_LT(std::abs(c.realtime_ns - real), 50'000);
  ASSERT_FALSE(m.tai_track().samples().empty());
  std::printf("REALTIME - TAI measured %lld ns\n",
              static_cast<long long>(m.tai_track().samples().back().offset_ns));
}

}  // namespace
}  // namespace chronolink
