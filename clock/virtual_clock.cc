#include "clock/virtual_clock.h"

#include <cmath>

namespace chronolink {

int64_t VirtualClock::Apply(int64_t real_ns) const { return ApplySmooth(real_ns) + p_.StepAt(real_ns); }

int64_t VirtualClock::Invert(int64_t virtual_ns) const {
  const int64_t before = InvertSmooth(virtual_ns);
  if (p_.step_ns == 0) return before;
  const int64_t after = InvertSmooth(virtual_ns - p_.step_ns);
  if (after >= p_.step_at_ns) return after;
  if (before < p_.step_at_ns) return before;
  return p_.step_at_ns;
}

int64_t VirtualClock::ApplySmooth(int64_t real_ns) const {
  const int64_t since_t0 = real_ns - p_.t0_ns;
  const double skew = p_.drift_ppm * 1e-6 * static_cast<double>(since_t0);
  return real_ns + p_.offset_ns + std::llround(skew);
}

int64_t VirtualClock::InvertSmooth(int64_t virtual_ns) const {
  // v = t + o + d (t - t0)  =>  t - t0 = (v - o - t0) / (1 + d)
  const int64_t rel = virtual_ns - p_.offset_ns - p_.t0_ns;
  const double scale = 1.0 + p_.drift_ppm * 1e-6;
  int64_t real = p_.t0_ns + std::llround(static_cast<double>(rel) / scale);
  // Correct the last nanosecond of rounding so Apply(Invert(v)) is as close to v as possible.
  for (int i = 0; i < 2; ++i) {
    const int64_t err = ApplySmooth(real) - virtual_ns;
    if (err == 0) break;
    real -= err > 0 ? 1 : -1;
  }
  return real;
}

RelativeTruth TrueRelativeOffset(const VirtualClockParams& a, const VirtualClockParams& b,
                                 int64_t x_a_ns) {
  const VirtualClock ca(a);
  const VirtualClock cb(b);
  const int64_t t = ca.Invert(x_a_ns);
  RelativeTruth truth;
  // b(t) - a(t), computed from differences only.
  const double tb_minus_t = static_cast<double>(b.offset_ns) +
                            b.drift_ppm * 1e-6 * static_cast<double>(t - b.t0_ns);
  const double ta_minus_t = static_cast<double>(a.offset_ns) +
                            a.drift_ppm * 1e-6 * static_cast<double>(t - a.t0_ns);
  truth.beta_ns = tb_minus_t - ta_minus_t + static_cast<double>(b.StepAt(t) - a.StepAt(t));
  truth.alpha = (b.drift_ppm - a.drift_ppm) * 1e-6 / (1.0 + a.drift_ppm * 1e-6);
  return truth;
}

}  // namespace chronolink
