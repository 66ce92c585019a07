// The simulated GPU's clock: a counter that is a pure, deterministic
// function of true time (the real CLOCK_REALTIME, read with ReadClockNs, never
// the collector's NodeClock, which may be a test-mode virtual clock: like the
// test bed's virtual clocks, the simulation's truth is the real clock).
//
//   ticks(t) = origin_ticks + rate_hz * integral over [origin, t] of (1 + y(s)) ds
//   y(s)     = rate_error + A sin(w (s - origin) + phase)   (A w = drift, w = 2 pi / period)
//
// minus a backwards step from a chosen instant on, read modulo 2^bits. The
// inverse (counter -> true time) is exact to 1 ns. The model also draws,
// from a caller's random generator, how long a read takes on either side of
// the counter sample (latency, jitter, an occasional slow read), so reads
// can be replayed from a seed; waiting is the backend's business.
//
// Pure and const: safe to share between threads. Valid within 2^53 ns (104
// days) of the origin, where a ns difference is exact in a double.
#pragma once

#include <cstdint>
#include <random>

namespace chronolink::collector {

struct SimulatedClockParams {
  uint64_t rate_hz = 100'000'000;  // nominal counter rate
  double rate_error_ppm = 0.0;     // constant frequency error: true rate = nominal * (1 + e)
  double drift_ppm_per_s = 0.0;    // peak d(frequency error)/dt of the sinusoidal wander
  double wander_period_s = 120.0;  // period of that wander (> 0)
  double wander_phase_rad = 0.0;
  int bits = 48;               // the raw counter wraps at 2^bits (8..64)
  int64_t origin_true_ns = 0;  // real CLOCK_REALTIME at which the counter reads origin_ticks
  uint64_t origin_ticks = 0;   // < 2^bits

  // A counter step backwards by backwards_by_ticks from this real
  // CLOCK_REALTIME instant on; 0: never.
  int64_t backwards_at_true_ns = 0;
  uint64_t backwards_by_ticks = 0;

  // Reads: a fixed latency split evenly around the counter sample, plus a
  // uniform [0, jitter_ns] split at random between before and after, plus,
  // with probability slow_read_prob, slow_read_ns on one side.
  int64_t latency_ns = 0;
  int64_t jitter_ns = 0;
  double slow_read_prob = 0.0;
  int64_t slow_read_ns = 0;
};

// How long one read waits inside its bracket, before and after the sample.
struct SimulatedReadDelays {
  int64_t before_ns = 0;
  int64_t after_ns = 0;
  bool slow = false;
};

class SimulatedClock {
 public:
  SimulatedClock() = default;
  explicit SimulatedClock(const SimulatedClockParams& params);

  // The unwrapped counter at real CLOCK_REALTIME `true_ns` (ticks, not ns).
  int64_t TicksAt(int64_t true_ns) const;
  // The raw counter as a device register would show it: TicksAt mod 2^bits.
  uint64_t RawAt(int64_t true_ns) const;

  // 0 before the backwards step (or when there is none), 1 from it on.
  int SegmentAt(int64_t true_ns) const;
  // The earliest real CLOCK_REALTIME instant of `segment` at which the
  // unwrapped counter reads >= ticks (so TicksAt(t - 1) < ticks <= TicksAt(t)
  // inside the segment). False when the segment never crosses that value.
  bool TrueNsOfTicks(int64_t ticks, int segment, int64_t* true_ns) const;

  // The fractional frequency error y at `true_ns` (1e-6 = 1 ppm).
  double FrequencyErrorAt(int64_t true_ns) const;

  SimulatedReadDelays DrawReadDelays(std::mt19937_64* rng) const;

  const SimulatedClockParams& params() const { return params_; }
  uint64_t wrap_mask() const { return mask_; }

 private:
  int64_t TicksOnSegmentAt(int64_t true_ns) const;    // without the step
  double WanderSeconds(double since_origin_s) const;  // integral of the sinusoid

  SimulatedClockParams params_;
  uint64_t mask_ = ~uint64_t{0} >> 16;
  double omega_ = 0.0;      // rad/s
  double amplitude_ = 0.0;  // of y's sinusoid (fraction)
};

}  // namespace chronolink::collector
