// The simulated GPU counter: forward model in integers plus a small double
// correction, inverse by bisection over integer ns (see the header).
#include "collector/device/simulated/simulated_clock.h"

#include <cmath>
#include <numbers>

namespace chronolink::collector {
namespace {

constexpr int64_t kNsPerSecond = 1'000'000'000;
// The model's range either side of its origin: a ns count below 2^53 is
// exact in a double, so the correction terms stay exact to far below a tick.
constexpr int64_t kHalfRangeNs = int64_t{1} << 53;

uint64_t MaskForBits(int bits) { return bits >= 64 ? ~uint64_t{0} : (uint64_t{1} << bits) - 1; }

}  // namespace

SimulatedClock::SimulatedClock(const SimulatedClockParams& params)
    : params_(params), mask_(MaskForBits(params.bits)) {
  if (params_.drift_ppm_per_s != 0.0 && params_.wander_period_s > 0.0) {
    omega_ = 2.0 * std::numbers::pi / params_.wander_period_s;
    amplitude_ = params_.drift_ppm_per_s * 1e-6 / omega_;  // peak dy/dt = amplitude * omega
  }
}

double SimulatedClock::WanderSeconds(double since_origin_s) const {
  if (amplitude_ == 0.0) return 0.0;
  const double phase = params_.wander_phase_rad;
  return amplitude_ / omega_ * (std::cos(phase) - std::cos(omega_ * since_origin_s + phase));
}

int64_t SimulatedClock::TicksOnSegmentAt(int64_t true_ns) const {
  const int64_t since_origin_ns = true_ns - params_.origin_true_ns;
  // Nominal part exactly: floor(dt * rate / 1e9) and its remainder.
  const __int128 product = static_cast<__int128>(since_origin_ns) * params_.rate_hz;
  __int128 whole = product / kNsPerSecond;
  __int128 remainder = product % kNsPerSecond;
  if (remainder < 0) {
    whole -= 1;
    remainder += kNsPerSecond;
  }
  // Rate error and wander: ppm-sized, so a double carries them with room.
  const double since_origin_s = static_cast<double>(since_origin_ns) * 1e-9;
  const double error_s = params_.rate_error_ppm * 1e-6 * since_origin_s + WanderSeconds(since_origin_s);
  const double fraction =
      static_cast<double>(remainder) * 1e-9 + static_cast<double>(params_.rate_hz) * error_s;
  const __int128 ticks =
      static_cast<__int128>(params_.origin_ticks) + whole + static_cast<__int128>(std::floor(fraction));
  return static_cast<int64_t>(ticks);
}

int SimulatedClock::SegmentAt(int64_t true_ns) const {
  return params_.backwards_at_true_ns != 0 && true_ns >= params_.backwards_at_true_ns ? 1 : 0;
}

int64_t SimulatedClock::TicksAt(int64_t true_ns) const {
  const int64_t ticks = TicksOnSegmentAt(true_ns);
  return SegmentAt(true_ns) == 1 ? ticks - static_cast<int64_t>(params_.backwards_by_ticks) : ticks;
}

uint64_t SimulatedClock::RawAt(int64_t true_ns) const {
  return static_cast<uint64_t>(TicksAt(true_ns)) & mask_;
}

bool SimulatedClock::TrueNsOfTicks(int64_t ticks, int segment, int64_t* true_ns) const {
  int64_t lo = params_.origin_true_ns - kHalfRangeNs;
  int64_t hi = params_.origin_true_ns + kHalfRangeNs;
  if (params_.backwards_at_true_ns != 0) {
    if (segment == 0) hi = params_.backwards_at_true_ns - 1;
    if (segment == 1) lo = params_.backwards_at_true_ns;
  } else if (segment != 0) {
    return false;
  }
  if (segment < 0 || segment > 1 || lo >= hi) return false;
  if (!(TicksAt(lo) < ticks && ticks <= TicksAt(hi))) return false;
  // Invariant: TicksAt(lo) < ticks <= TicksAt(hi); the counter rises within a segment.
  while (hi - lo > 1) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (TicksAt(mid) < ticks) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  *true_ns = hi;
  return true;
}

double SimulatedClock::FrequencyErrorAt(int64_t true_ns) const {
  const double since_origin_s = static_cast<double>(true_ns - params_.origin_true_ns) * 1e-9;
  return params_.rate_error_ppm * 1e-6 +
         amplitude_ * std::sin(omega_ * since_origin_s + params_.wander_phase_rad);
}

SimulatedReadDelays SimulatedClock::DrawReadDelays(std::mt19937_64* rng) const {
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  SimulatedReadDelays d;
  d.before_ns = params_.latency_ns / 2;
  d.after_ns = params_.latency_ns - d.before_ns;
  // Draw the same number of values every time, so a seed replays the same reads.
  const double jitter_draw = unit(*rng);
  const double split_draw = unit(*rng);
  const double slow_draw = unit(*rng);
  const double side_draw = unit(*rng);
  const auto extra = static_cast<int64_t>(jitter_draw * static_cast<double>(params_.jitter_ns));
  const auto extra_before = static_cast<int64_t>(split_draw * static_cast<double>(extra));
  d.before_ns += extra_before;
  d.after_ns += extra - extra_before;
  if (slow_draw < params_.slow_read_prob) {
    d.slow = true;
    (side_draw < 0.5 ? d.before_ns : d.after_ns) += params_.slow_read_ns;
  }
  return d;
}

}  // namespace chronolink::collector
