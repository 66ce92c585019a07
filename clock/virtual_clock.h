// Test-only virtual clock. All namespaces of a test bed share one kernel
// clock, so the true offset between them is 0; applying
//   t' = t + offset + drift * (t - t0)
// to every node-clock timestamp at ingestion gives each agent a skewed clock
// with exactly known truth. Refused unless test mode is switched on.
#pragma once

#include <cstdint>
#include <string>

namespace chronolink {

struct VirtualClockParams {
  int64_t offset_ns = 0;
  double drift_ppm = 0.0;
  int64_t t0_ns = 0;  // reference instant on the real node clock
  // A step of the clock (settimeofday, a stepping NTP daemon): from the real
  // instant step_at_ns on, the clock reads step_ns more (less when negative).
  int64_t step_at_ns = 0;
  int64_t step_ns = 0;

  bool IsIdentity() const { return offset_ns == 0 && drift_ppm == 0.0 && step_ns == 0; }
  int64_t StepAt(int64_t real_ns) const { return step_ns != 0 && real_ns >= step_at_ns ? step_ns : 0; }
};

class VirtualClock {
 public:
  VirtualClock() = default;
  explicit VirtualClock(const VirtualClockParams& p) : p_(p) {}

  // Real node-clock instant -> virtual instant. Only the (small) difference
  // t - t0 goes through floating point; the result stays int64 ns.
  int64_t Apply(int64_t real_ns) const;
  // Virtual -> real (inverse), exact to 1 ns. Across a step: where the
  // clock reads v twice (a step back), the later instant; where it never
  // reads v (skipped forward), the instant of the step.
  int64_t Invert(int64_t virtual_ns) const;

  const VirtualClockParams& params() const { return p_; }

 private:
  int64_t ApplySmooth(int64_t real_ns) const;  // without the step
  int64_t InvertSmooth(int64_t virtual_ns) const;

  VirtualClockParams p_;
};

// Ground truth for a test bed: offset of clock b relative to clock a
// (b - a, ns) at the instant a reads x_a_ns, and the relative drift
// d(b - a)/d(a), as the estimator defines them.
struct RelativeTruth {
  double beta_ns;
  double alpha;
};
RelativeTruth TrueRelativeOffset(const VirtualClockParams& a, const VirtualClockParams& b,
                                 int64_t x_a_ns);

}  // namespace chronolink
