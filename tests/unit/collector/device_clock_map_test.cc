// DeviceClockMap against a simulated truth: a test double of a GPU clock
// (rate error, linear drift, a slow sinusoidal wander, an optional step)
// read through brackets with jitter and occasional slow reads, through a
// DeviceCounter that wraps. Every converted instant is checked against the
// exact host time of that device instant; the bound must cover all of them.
#include "collector/clock/device_clock_map.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numbers>
#include <random>
#include <string>
#include <vector>

#include "collector/clock/device_counter.h"

namespace chronolink::collector {
namespace {

constexpr int64_t kHostEpochNs = 1'700'000'000'000'000'000;  // kNodeRealtime at elapsed 0
constexpr int64_t kMs = 1'000'000;
constexpr int64_t kSec = 1'000'000'000;

// Test double: a GPU counter whose continuous time runs at its own rate
// against the host's REALTIME. Times inside are elapsed host ns since
// kHostEpochNs; (device - host) is a difference, so a double is exact
// enough (< 1e-6 ns at these magnitudes).
struct SimulatedGpuClock {
  uint64_t hz = 100'000'000;
  int bits = 32;
  uint64_t start_ticks = 0xF000'0000u;  // wraps early in the run
  double rate_ppb = 40'000;             // constant frequency error
  double drift_ppb_per_s = 5;           // the rate itself moves linearly
  double wander_ppb = 300;              // sinusoidal rate wander, amplitude
  double wander_period_s = 60;
  int64_t step_at_ns = -1;       // elapsed host ns of a device step; < 0: none
  double step_ns = 0;            // the counter jumps by this much
  int64_t host_step_at_ns = -1;  // elapsed host ns where REALTIME steps
  int64_t host_step_ns = 0;

  // device - host (continuous) at elapsed host t.
  double DeviceMinusHostNs(double t_ns) const {
    const double t = t_ns / 1e9;
    const double w = 2 * std::numbers::pi / wander_period_s;
    double d =
        rate_ppb * t + 0.5 * drift_ppb_per_s * t * t + wander_ppb / w * (1 - std::cos(w * t));
    if (step_at_ns >= 0 && t_ns >= static_cast<double>(step_at_ns)) d += step_ns;
    return d;
  }
  // The unwrapped ns DeviceCounter reports for start_ticks.
  int64_t StartDeviceNs() const {
    return static_cast<int64_t>(static_cast<__int128>(start_ticks) * 1'000'000'000 / hz);
  }
  // The fraction of a ns that StartDeviceNs() floored away.
  double StartFractionNs() const {
    return static_cast<double>(static_cast<__int128>(start_ticks) * 1'000'000'000 % hz) /
           static_cast<double>(hz);
  }
  // Continuous device ns since StartDeviceNs() at elapsed host t.
  double ElapsedDeviceNs(double t_ns) const {
    return StartFractionNs() + t_ns + DeviceMinusHostNs(t_ns);
  }
  // The raw counter value at elapsed host t: the tick it is in, wrapped.
  uint64_t RawAt(int64_t t_ns) const {
    const double t = static_cast<double>(t_ns);
    const double ticks = (t + DeviceMinusHostNs(t)) * static_cast<double>(hz) / 1e9;
    const unsigned __int128 total = start_ticks + static_cast<unsigned __int128>(std::floor(ticks));
    const unsigned __int128 mask = bits == 64 ? ~uint64_t{0} : (uint64_t{1} << bits) - 1;
    return static_cast<uint64_t>(total & mask);
  }
  // REALTIME as the host reads it at elapsed host t.
  int64_t HostReadAt(int64_t t_ns) const {
    const bool stepped = host_step_at_ns >= 0 && t_ns >= host_step_at_ns;
    return kHostEpochNs + t_ns + (stepped ? host_step_ns : 0);
  }
  // Elapsed host time at which the device's continuous time reached
  // device_ns (unwrapped ns as DeviceCounter reports it), on the branch
  // before or after the device step: t = target - (device - host)(t),
  // a contraction (the rate is 1 within 1e-4).
  double ElapsedHostAtDevice(int64_t device_ns, bool after_step) const {
    const double target = static_cast<double>(device_ns - StartDeviceNs()) - StartFractionNs();
    const double branch = (step_at_ns >= 0 && after_step) ? step_ns : 0;
    double t = target;
    for (int i = 0; i < 8; ++i) {
      double smooth = DeviceMinusHostNs(t);
      if (step_at_ns >= 0 && t >= static_cast<double>(step_at_ns)) smooth -= step_ns;
      t = target - smooth - branch;
    }
    return t;
  }
  // True REALTIME value of a device instant.
  int64_t TrueHostNs(int64_t device_ns) const {
    const double t = ElapsedHostAtDevice(device_ns, false);
    const bool after = step_at_ns >= 0 && t >= static_cast<double>(step_at_ns);
    const double te = after ? ElapsedHostAtDevice(device_ns, true) : t;
    return HostReadAt(static_cast<int64_t>(std::llround(te)));
  }
};

// Bracketed reads of the double: width jitter, latch anywhere inside the
// bracket, some reads slowed (preempted) past any sane limit.
struct ReadModel {
  int64_t width_ns = 2'000;
  double slow_fraction = 0.02;
  int64_t slow_width_ns = 200'000;
  int reads_per_sample = 5;
};

class Sampler {
 public:
  Sampler(const SimulatedGpuClock& gpu, const ReadModel& reads, uint64_t seed)
      : gpu_(gpu), reads_(reads), rng_(seed), counter_(gpu.hz, gpu.bits) {}

  std::vector<SnapshotReading> ReadsAt(int64_t t_ns) {
    std::uniform_real_distribution<double> unit(0.0, 1.0);
    std::vector<SnapshotReading> out;
    for (int i = 0; i < reads_.reads_per_sample; ++i) {
      const bool slow = unit(rng_) < reads_.slow_fraction;
      const int64_t width =
          slow ? reads_.slow_width_ns : static_cast<int64_t>(reads_.width_ns * (0.5 + unit(rng_)));
      const int64_t latch = t_ns + i * 5'000;
      const int64_t before_offset = static_cast<int64_t>(unit(rng_) * width);
      int64_t device = 0;
      std::string why;
      if (!counter_.ExtendRead(gpu_.RawAt(latch), &device, &why)) {
        ADD_FAILURE() << why;
        continue;
      }
      out.push_back({gpu_.HostReadAt(latch - before_offset), device,
                     gpu_.HostReadAt(latch - before_offset + width)});
    }
    return out;
  }
  const DeviceCounter& counter() const { return counter_; }

 private:
  SimulatedGpuClock gpu_;
  ReadModel reads_;
  std::mt19937_64 rng_;
  DeviceCounter counter_;
};

// One device tick (10 ns at 100 MHz) is part of each pair's error: the
// counter shows the tick's start while the device is anywhere inside it.
DeviceClockMapOptions OptionsFor(const SimulatedGpuClock& gpu) {
  DeviceClockMapOptions o;
  o.read_granularity_ns = static_cast<int64_t>(1'000'000'000 / gpu.hz) + 2;
  return o;
}

std::vector<SampleOutcome> Feed(DeviceClockMap* map, Sampler* sampler, int64_t period_ns,
                                int count) {
  std::vector<SampleOutcome> outcomes;
  for (int i = 0; i < count; ++i) {
    const std::vector<SnapshotReading> reads = sampler->ReadsAt(i * period_ns);
    outcomes.push_back(map->AddSample(reads));
  }
  return outcomes;
}

struct Coverage {
  int checked = 0;
  int converted = 0;
  int violations = 0;
  int64_t worst_excess_ns = 0;
  std::vector<int64_t> bounds;
  int64_t MedianBound() {
    if (bounds.empty()) return -1;
    std::nth_element(bounds.begin(), bounds.begin() + bounds.size() / 2, bounds.end());
    return bounds[bounds.size() / 2];
  }
};

// Converts `count` device instants drawn uniformly from [lo, hi] and checks
// each bound. The truth is rounded to the ns: 1 ns of slack for that.
Coverage CheckToHost(const DeviceClockMap& map, const SimulatedGpuClock& gpu, int64_t lo,
                     int64_t hi, int count, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int64_t> pick(lo, hi);
  Coverage c;
  for (int i = 0; i < count; ++i) {
    const int64_t d = pick(rng);
    ++c.checked;
    const ConvertedStamp s = map.ToHost(d);
    if (!s.ok) continue;
    ++c.converted;
    c.bounds.push_back(s.error_ns);
    const int64_t excess = std::llabs(s.realtime_ns - gpu.TrueHostNs(d)) - (s.error_ns + 1);
    if (excess > 0) {
      ++c.violations;
      c.worst_excess_ns = std::max(c.worst_excess_ns, excess);
    }
  }
  return c;
}

// ---------------------------------------------------------------------------

TEST(DeviceClockMapTest, EmptyMapConvertsNothing) {
  DeviceClockMap map;
  EXPECT_FALSE(map.ToHost(123).ok);
  EXPECT_FALSE(map.ToDevice(kHostEpochNs).ok);
  EXPECT_TRUE(map.Knots().empty());
  EXPECT_EQ(map.stats().segments, 0u);
}

TEST(DeviceClockMapTest, BoundCoversTruthThroughJitterDriftWanderAndWraps) {
  SimulatedGpuClock gpu;
  Sampler sampler(gpu, ReadModel{}, 1);
  DeviceClockMap map(OptionsFor(gpu));
  const std::vector<SampleOutcome> outcomes = Feed(&map, &sampler, 100 * kMs, 2'000);  // 200 s
  EXPECT_GE(sampler.counter().wraps(), 4u);  // 2^32 ticks at 100 MHz: 43 s
  EXPECT_EQ(map.stats().segments, 1u);
  EXPECT_EQ(std::count(outcomes.begin(), outcomes.end(), SampleOutcome::kNewSegment), 0);
  EXPECT_GE(map.stats().accepted, 1'990u);

  const std::vector<DeviceClockKnot> knots = map.Knots();
  ASSERT_GE(knots.size(), 2u);
  // Inside the knots, and up to 2 s past either end (extrapolation).
  Coverage c = CheckToHost(map, gpu, knots.front().device_ns - 2 * kSec,
                           knots.back().device_ns + 2 * kSec, 20'000, 2);
  EXPECT_EQ(c.violations, 0) << "worst excess " << c.worst_excess_ns << " ns";
  EXPECT_EQ(c.converted, c.checked);
  // 2 us brackets: the bound sits near half a bracket (loose).
  EXPECT_LT(c.MedianBound(), 3'000);
  EXPECT_GT(c.MedianBound(), 500);
}

TEST(DeviceClockMapTest, TightBracketsGiveATightBoundThatStillCovers) {
  SimulatedGpuClock gpu;
  gpu.hz = 1'000'000'000;
  gpu.bits = 64;
  gpu.start_ticks = 5'000'000'000;
  ReadModel reads;
  reads.width_ns = 200;
  Sampler sampler(gpu, reads, 3);
  DeviceClockMap map(OptionsFor(gpu));
  Feed(&map, &sampler, 10 * kMs, 3'000);
  const std::vector<DeviceClockKnot> knots = map.Knots();
  Coverage c = CheckToHost(map, gpu, knots.front().device_ns, knots.back().device_ns, 10'000, 4);
  EXPECT_EQ(c.violations, 0) << "worst excess " << c.worst_excess_ns << " ns";
  EXPECT_LT(c.MedianBound(), 400);
}

TEST(DeviceClockMapTest, WideReadsAreRejectedAndTheTightestIsKept) {
  DeviceClockMap map;
  const SnapshotReading wide1{kHostEpochNs, 1'000'000, kHostEpochNs + 80'000};
  const SnapshotReading wide2{kHostEpochNs + 100'000, 1'100'000, kHostEpochNs + 160'000};
  const SnapshotReading wides[] = {wide1, wide2};
  EXPECT_EQ(map.AddSample(wides), SampleOutcome::kRejectedWide);
  EXPECT_EQ(map.stats().rejected_wide, 1u);
  EXPECT_TRUE(map.Knots().empty());

  const SnapshotReading narrow{kHostEpochNs + 200'000, 1'200'000, kHostEpochNs + 201'000};
  const SnapshotReading narrower{kHostEpochNs + 300'000, 1'300'000, kHostEpochNs + 300'400};
  const SnapshotReading mixed[] = {wide1, narrow, narrower, wide2};
  EXPECT_EQ(map.AddSample(mixed), SampleOutcome::kAccepted);
  EXPECT_EQ(map.stats().last_bracket_ns, 400);
  ASSERT_EQ(map.Knots().size(), 1u);
  EXPECT_EQ(map.Knots()[0].device_ns, 1'300'000);
  EXPECT_EQ(map.Knots()[0].host_ns, kHostEpochNs + 300'200);
  EXPECT_EQ(map.Knots()[0].error_ns, 200 + map.options().read_granularity_ns);
  EXPECT_EQ(map.stats().samples, 2u);
  EXPECT_EQ(map.stats().accepted, 1u);
}

TEST(DeviceClockMapTest, InvalidReadsAreRejected) {
  DeviceClockMap map;
  EXPECT_EQ(map.AddSample({}), SampleOutcome::kRejectedInvalid);
  const SnapshotReading negative_width{kHostEpochNs + 10, 5, kHostEpochNs};
  const SnapshotReading negative_device{kHostEpochNs, -5, kHostEpochNs + 10};
  const SnapshotReading zero_host{0, 5, 10};
  const SnapshotReading overflowing{1, 5, std::numeric_limits<int64_t>::min()};
  const SnapshotReading bad[] = {negative_width, negative_device, zero_host, overflowing};
  EXPECT_EQ(map.AddSample(bad), SampleOutcome::kRejectedInvalid);
  EXPECT_EQ(map.stats().rejected_invalid, 2u);
  EXPECT_TRUE(map.Knots().empty());
}

TEST(DeviceClockMapTest, DeviceTimeNotAfterTheNewestPairIsRejected) {
  DeviceClockMap map;
  const SnapshotReading first{kHostEpochNs, 10 * kMs, kHostEpochNs + 100};
  EXPECT_EQ(map.AddSample({&first, 1}), SampleOutcome::kAccepted);
  const SnapshotReading same{kHostEpochNs + 5 * kMs, 10 * kMs, kHostEpochNs + 5 * kMs + 100};
  const SnapshotReading earlier{kHostEpochNs + 6 * kMs, 9 * kMs, kHostEpochNs + 6 * kMs + 100};
  EXPECT_EQ(map.AddSample({&same, 1}), SampleOutcome::kRejectedBackwards);
  EXPECT_EQ(map.AddSample({&earlier, 1}), SampleOutcome::kRejectedBackwards);
  EXPECT_EQ(map.stats().rejected_backwards, 2u);
  EXPECT_EQ(map.Knots().size(), 1u);
}

TEST(DeviceClockMapTest, ADeviceStepStartsASegmentAndInstantsAcrossItAreNotConvertible) {
  SimulatedGpuClock gpu;
  gpu.step_at_ns = 30 * kSec + 50 * kMs;  // between two samples
  gpu.step_ns = 3 * kMs;                  // the counter jumps ahead
  Sampler sampler(gpu, ReadModel{}, 5);
  DeviceClockMap map(OptionsFor(gpu));
  const std::vector<SampleOutcome> outcomes = Feed(&map, &sampler, 100 * kMs, 600);
  EXPECT_EQ(std::count(outcomes.begin(), outcomes.end(), SampleOutcome::kNewSegment), 1);
  EXPECT_EQ(outcomes[301], SampleOutcome::kNewSegment);
  EXPECT_EQ(map.stats().segments, 2u);

  const std::vector<DeviceClockKnot> knots = map.Knots();
  size_t boundary = 0;
  for (size_t i = 1; i < knots.size(); ++i) {
    if (knots[i].segment != knots[i - 1].segment) boundary = i;
  }
  ASSERT_GT(boundary, 0u);
  const int64_t gap_lo = knots[boundary - 1].device_ns;
  const int64_t gap_hi = knots[boundary].device_ns;
  for (int64_t d = gap_lo + 1; d < gap_hi; d += (gap_hi - gap_lo) / 97) {
    EXPECT_FALSE(map.ToHost(d).ok) << d - gap_lo;
  }
  // Either side of the step converts, within its bound.
  Coverage before = CheckToHost(map, gpu, knots.front().device_ns, gap_lo, 5'000, 6);
  Coverage after = CheckToHost(map, gpu, gap_hi, knots.back().device_ns + kSec, 5'000, 7);
  EXPECT_EQ(before.violations, 0) << before.worst_excess_ns;
  EXPECT_EQ(after.violations, 0) << after.worst_excess_ns;
  EXPECT_EQ(before.converted, before.checked);
  EXPECT_EQ(after.converted, after.checked);
}

TEST(DeviceClockMapTest, ARealtimeStepBackStartsASegmentAndToDevicePrefersTheNewest) {
  SimulatedGpuClock gpu;
  gpu.host_step_at_ns = 20 * kSec + 50 * kMs;
  gpu.host_step_ns = -kSec;  // NTP stepped REALTIME back by 1 s
  Sampler sampler(gpu, ReadModel{}, 8);
  DeviceClockMap map(OptionsFor(gpu));
  Feed(&map, &sampler, 100 * kMs, 400);
  EXPECT_EQ(map.stats().segments, 2u);
  // A host instant 19.5 s in happened twice; the newest occurrence is 20.5 s
  // of elapsed time in, after the step.
  const int64_t host = kHostEpochNs + 19'500 * kMs;
  const ConvertedStamp d = map.ToDevice(host);
  ASSERT_TRUE(d.ok);
  const int64_t expected =
      gpu.StartDeviceNs() + std::llround(gpu.ElapsedDeviceNs(static_cast<double>(20'500 * kMs)));
  EXPECT_LT(std::llabs(d.realtime_ns - expected), d.error_ns + 20);
}

TEST(DeviceClockMapTest, ThinningBoundsMemoryAndTheBoundStillCovers) {
  SimulatedGpuClock gpu;
  gpu.wander_ppb = 600;
  gpu.wander_period_s = 40;
  Sampler sampler(gpu, ReadModel{}, 9);
  DeviceClockMapOptions options = OptionsFor(gpu);
  options.max_knots = 64;
  DeviceClockMap map(options);
  size_t largest = 0;
  for (int i = 0; i < 3'000; ++i) {  // 150 s at 50 ms
    map.AddSample(sampler.ReadsAt(i * 50 * kMs));
    largest = std::max(largest, map.Knots().size());
  }
  EXPECT_LE(largest, 64u);
  EXPECT_GT(map.stats().thinned, 2'800u);
  EXPECT_GT(map.stats().max_fit_residual_ns, 0);
  const std::vector<DeviceClockKnot> knots = map.Knots();
  Coverage c = CheckToHost(map, gpu, knots.front().device_ns, knots.back().device_ns, 20'000, 10);
  EXPECT_EQ(c.violations, 0) << "worst excess " << c.worst_excess_ns << " ns";
  EXPECT_EQ(c.converted, c.checked);
  // Thinned detail costs bound but stays sane: the old gaps span seconds
  // and the wander moves the truth off their chords by about a microsecond.
  EXPECT_LT(c.MedianBound(), 30'000);
  // The newest detail is untouched: just behind the newest knot the bound
  // is still about half a bracket.
  const ConvertedStamp recent = map.ToHost(knots.back().device_ns - 10 * kMs);
  ASSERT_TRUE(recent.ok);
  EXPECT_LT(recent.error_ns, 3'000);
}

TEST(DeviceClockMapTest, ExtrapolationGrowsWithDistanceAndStopsAtTheLimit) {
  DeviceClockMapOptions options;
  options.max_extrapolation_ns = 5 * kSec;
  DeviceClockMap map(options);
  const SnapshotReading only{kHostEpochNs, 100 * kSec, kHostEpochNs + 1'000};
  ASSERT_EQ(map.AddSample({&only, 1}), SampleOutcome::kAccepted);
  // One knot: its error plus max_rate_ppb of the distance, either side.
  const ConvertedStamp ahead = map.ToHost(101 * kSec);
  ASSERT_TRUE(ahead.ok);
  EXPECT_EQ(ahead.realtime_ns, kHostEpochNs + 500 + kSec);
  EXPECT_EQ(ahead.error_ns, 501 + options.max_rate_ppb);
  const ConvertedStamp behind = map.ToHost(99 * kSec);
  ASSERT_TRUE(behind.ok);
  EXPECT_EQ(behind.error_ns, ahead.error_ns);
  EXPECT_TRUE(map.ToHost(105 * kSec).ok);
  EXPECT_FALSE(map.ToHost(105 * kSec + 1).ok);
  EXPECT_FALSE(map.ToHost(95 * kSec - 1).ok);

  // With a rate known, the bound grows with max_rate_change instead.
  SimulatedGpuClock gpu;
  Sampler sampler(gpu, ReadModel{}, 11);
  DeviceClockMap fitted(OptionsFor(gpu));
  Feed(&fitted, &sampler, 100 * kMs, 300);
  const int64_t last = fitted.Knots().back().device_ns;
  int64_t previous_bound = 0;
  for (int64_t d : {kMs, 10 * kMs, 100 * kMs, kSec, 5 * kSec}) {
    const ConvertedStamp s = fitted.ToHost(last + d);
    ASSERT_TRUE(s.ok) << d;
    EXPECT_GE(s.error_ns, previous_bound);
    EXPECT_LE(std::llabs(s.realtime_ns - gpu.TrueHostNs(last + d)), s.error_ns + 1) << d;
    previous_bound = s.error_ns;
  }
  EXPECT_LT(fitted.ToHost(last + 100 * kMs).error_ns, 10'000);
  EXPECT_LT(fitted.ToHost(last + kSec).error_ns, options.max_rate_ppb);  // far below flat
  EXPECT_FALSE(fitted.ToHost(last + fitted.options().max_extrapolation_ns + 1).ok);
}

// A sampler that stalls: 1 s samples, then nothing for a minute, then
// nothing for ten minutes. The rate drifts 10 ppb/s, so across the 600 s gap
// it moves by 6 ppm and the truth bows off the chord by a/2 (D/2)^2 = 450 us
// at the middle, far beyond the knots' ~1 us errors: only the curvature
// term (rho times the periods the gap spans) covers it, and it grows with
// the gap (about rho p D / 4: 1 ms for the minute, 90 ms for ten).
TEST(DeviceClockMapTest, TheBoundBetweenFarApartKnotsCoversTheRateChangeInTheGap) {
  SimulatedGpuClock gpu;
  gpu.bits = 64;  // a 32-bit counter would wrap unseen in the gaps
  gpu.drift_ppb_per_s = 10;
  gpu.wander_ppb = 0;
  ReadModel reads;
  reads.slow_fraction = 0;  // every sample kept: the gaps are where they are put
  Sampler sampler(gpu, reads, 15);
  DeviceClockMap map(OptionsFor(gpu));
  std::vector<int64_t> sample_s;
  for (int64_t s = 0; s <= 60; ++s) sample_s.push_back(s);
  for (int64_t s = 120; s <= 180; ++s) sample_s.push_back(s);  // after a 60 s gap
  for (int64_t s = 780; s <= 840; ++s) sample_s.push_back(s);  // after a 600 s gap
  for (int64_t s : sample_s) {
    ASSERT_EQ(map.AddSample(sampler.ReadsAt(s * kSec)), SampleOutcome::kAccepted) << s;
  }
  const std::vector<DeviceClockKnot> knots = map.Knots();
  ASSERT_EQ(knots.size(), sample_s.size());
  // Knot indices: 60 -> 61 spans the minute, 121 -> 122 the ten minutes.
  const auto gap_mid = [&](size_t hi) { return (knots[hi - 1].device_ns + knots[hi].device_ns) / 2; };
  const int64_t sampled_mid = gap_mid(30);
  const int64_t minute_mid = gap_mid(61);
  const int64_t ten_minutes_mid = gap_mid(122);

  const ConvertedStamp far = map.ToHost(ten_minutes_mid);
  ASSERT_TRUE(far.ok);
  const int64_t miss = std::llabs(far.realtime_ns - gpu.TrueHostNs(ten_minutes_mid));
  EXPECT_GT(miss, 300'000);  // the truth really is far off the chord
  EXPECT_LE(miss, far.error_ns + 1) << "bound " << far.error_ns << " ns";
  Coverage c = CheckToHost(map, gpu, knots[121].device_ns, knots[122].device_ns, 2'000, 16);
  EXPECT_EQ(c.violations, 0) << "worst excess " << c.worst_excess_ns << " ns";
  EXPECT_EQ(c.converted, c.checked);

  const ConvertedStamp sampled = map.ToHost(sampled_mid);
  const ConvertedStamp minute = map.ToHost(minute_mid);
  ASSERT_TRUE(sampled.ok);
  ASSERT_TRUE(minute.ok);
  EXPECT_LE(std::llabs(minute.realtime_ns - gpu.TrueHostNs(minute_mid)), minute.error_ns + 1);
  EXPECT_LT(sampled.error_ns, 3'000);  // about half a bracket where sampled
  EXPECT_GT(minute.error_ns, 10 * sampled.error_ns);
  EXPECT_GT(far.error_ns, 10 * minute.error_ns);
  EXPECT_LT(far.error_ns, kSec);  // loose, but still a bound
}

TEST(DeviceClockMapTest, ToDeviceInvertsWithTheSameBound) {
  SimulatedGpuClock gpu;
  gpu.step_at_ns = 30 * kSec + 50 * kMs;
  gpu.step_ns = 3 * kMs;
  Sampler sampler(gpu, ReadModel{}, 12);
  DeviceClockMap map(OptionsFor(gpu));
  Feed(&map, &sampler, 100 * kMs, 600);
  const std::vector<DeviceClockKnot> knots = map.Knots();
  std::mt19937_64 rng(13);
  std::uniform_int_distribution<int64_t> pick(knots.front().host_ns, knots.back().host_ns + kSec);
  int converted = 0;
  int violations = 0;
  for (int i = 0; i < 5'000; ++i) {
    const int64_t host = pick(rng);
    const ConvertedStamp d = map.ToDevice(host);
    if (!d.ok) continue;
    ++converted;
    // The bound is in host ns: the device instant's true host time is
    // within it of the host instant asked for.
    if (std::llabs(gpu.TrueHostNs(d.realtime_ns) - host) > d.error_ns + 1) ++violations;
    const ConvertedStamp back = map.ToHost(d.realtime_ns);
    ASSERT_TRUE(back.ok);
    EXPECT_LE(std::llabs(back.realtime_ns - host), 1);
  }
  EXPECT_EQ(violations, 0);
  EXPECT_GT(converted, 4'900);  // all but the host instants inside the step's gap

  // Host instants between the last pair before the step and the first after
  // it are not convertible.
  size_t boundary = 0;
  for (size_t i = 1; i < knots.size(); ++i) {
    if (knots[i].segment != knots[i - 1].segment) boundary = i;
  }
  ASSERT_GT(boundary, 0u);
  const int64_t gap_mid = (knots[boundary - 1].host_ns + knots[boundary].host_ns) / 2;
  EXPECT_FALSE(map.ToDevice(gap_mid).ok);
}

TEST(DeviceClockMapTest, SameInputSameMap) {
  SimulatedGpuClock gpu;
  DeviceClockMapOptions options = OptionsFor(gpu);
  options.max_knots = 100;
  Sampler a_reads(gpu, ReadModel{}, 14);
  Sampler b_reads(gpu, ReadModel{}, 14);
  DeviceClockMap a(options);
  DeviceClockMap b(options);
  Feed(&a, &a_reads, 100 * kMs, 500);
  Feed(&b, &b_reads, 100 * kMs, 500);
  const std::vector<DeviceClockKnot> ka = a.Knots();
  const std::vector<DeviceClockKnot> kb = b.Knots();
  ASSERT_EQ(ka.size(), kb.size());
  for (size_t i = 0; i < ka.size(); ++i) {
    EXPECT_EQ(ka[i].device_ns, kb[i].device_ns);
    EXPECT_EQ(ka[i].host_ns, kb[i].host_ns);
    EXPECT_EQ(ka[i].error_ns, kb[i].error_ns);
  }
  const int64_t mid = (ka.front().device_ns + ka.back().device_ns) / 2;
  EXPECT_EQ(a.ToHost(mid).realtime_ns, b.ToHost(mid).realtime_ns);
  EXPECT_EQ(a.ToHost(mid).error_ns, b.ToHost(mid).error_ns);
}

TEST(DeviceClockMapTest, ASegmentOfLoneKnotsStillKeepsMemoryBounded) {
  // Every sample disagrees with the one before by far more than any bound:
  // each is a step, no knot can be thinned, so the oldest are forgotten.
  DeviceClockMapOptions options;
  options.max_knots = 8;
  DeviceClockMap map(options);
  for (int i = 0; i < 100; ++i) {
    const int64_t host = kHostEpochNs + i * kSec + (i % 2) * 50 * kMs;
    const SnapshotReading r{host, (i + 1) * kSec, host + 1'000};
    const SampleOutcome o = map.AddSample({&r, 1});
    EXPECT_EQ(o, i == 0 ? SampleOutcome::kAccepted : SampleOutcome::kNewSegment);
  }
  EXPECT_LE(map.Knots().size(), 8u);
  EXPECT_EQ(map.stats().segments, 100u);
  EXPECT_FALSE(map.ToHost(50 * kSec).ok);             // forgotten
  EXPECT_FALSE(map.ToHost(99 * kSec + kSec / 2).ok);  // across a step
  EXPECT_TRUE(map.ToHost(100 * kSec + 10 * kMs).ok);  // past the newest
}

}  // namespace
}  // namespace chronolink::collector
