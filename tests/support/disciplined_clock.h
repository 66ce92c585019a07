// A test bed node's clocks with their exact truth (clock/clock_trajectory.h),
// as the clock tests draw them: an oscillator 17 ppm fast with wander (its
// MONOTONIC_RAW), and a daemon that changes REALTIME's rate every second
// by up to ±`max_change_fine` (around -17 ppm: a trained frequency) and
// steps it once by `step_ns` 30.12 s in, between two millisecond samples.
#pragma once

#include <cstdint>
#include <random>

#include "clock/clock_trajectory.h"
#include "clock/oscillator_model.h"
#include "clock/realtime_raw_map.h"

namespace chronolink::testing {

struct DisciplinedClock {
  ClockTrajectory raw;
  ClockTrajectory correction;
  ClockTrajectory realtime;  // raw + correction
  int64_t step_at = 0;       // true instant of the step

  // What the node's sampling reads at true t: both clocks, and REALTIME's
  // rate against RAW as the kernel reports it (or not).
  ClockPairSample SampleAt(int64_t t, bool with_rate) const {
    const __int128 rate = static_cast<__int128>(correction.SlopeAt(t)) * kFinePerNs / raw.SlopeAt(t);
    return {realtime.ReadAt(t), raw.ReadAt(t), 0, with_rate ? static_cast<int64_t>(rate) : kRateUnknown};
  }
};

// 70 s of it from true instant t0_ns, drawn from `seed`.
inline DisciplinedClock MakeDisciplinedClock(uint64_t seed, int64_t t0_ns, int64_t max_change_fine, int64_t step_ns) {
  constexpr int64_t kSecond = 1'000'000'000;
  OscillatorParams p;
  p.offset_ns = 40'000;
  p.frequency_ppm = 17;
  p.white_fm_adev_1s = 5e-9;
  p.random_walk_fm_adev_1s = 2e-11;
  p.seed = seed;
  DisciplinedClock n;
  n.raw = OscillatorTrajectory(p, t0_ns, t0_ns + 70 * kSecond);
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int64_t> change(-max_change_fine, max_change_fine);
  int64_t slope = -17'000'000'000;
  n.correction = ClockTrajectory(t0_ns, 0, slope);
  n.step_at = t0_ns + 30 * kSecond + 123'457'000;
  for (int s = 1; s < 70; ++s) {
    slope += change(rng);
    const int64_t at = t0_ns + s * kSecond + 777 * s;
    if (at > n.step_at && at - kSecond < n.step_at) {
      n.correction.ChangeAt(n.step_at, slope, static_cast<FineNs>(step_ns) * kFinePerNs);
    }
    n.correction.ChangeAt(at, slope);
  }
  n.realtime = ClockTrajectory::Sum(n.raw, n.correction);
  return n;
}

}  // namespace chronolink::testing
