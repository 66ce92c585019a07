#include "clock/fit_clock_remap.h"

#include <algorithm>
#include <limits>

#include "clock/clock_trajectory.h"

namespace chronolink {
namespace {

// at + (v − at)·num/den, rounded, in 128 bits and clamped to int64: a
// peer's stamps and remap come off the wire and may be anything.
int64_t Rescale(int64_t at, int64_t v, int64_t num_rate_fine, int64_t den_rate_fine) {
  const __int128 f = kFinePerNs;
  const __int128 num = (static_cast<__int128>(v) - at) * (f + num_rate_fine);
  const __int128 den = f + den_rate_fine;
  if (den <= 0) return v;
  const __int128 q = (num >= 0 ? num + den / 2 : num - den / 2) / den;
  const __int128 out = static_cast<__int128>(at) + q;
  return static_cast<int64_t>(
      std::clamp<__int128>(out, std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()));
}

}  // namespace

int64_t FitClockRemap::Apply(int64_t fit_ns) const {
  return fit_ns >= at_fit_ns ? fit_ns : Rescale(at_fit_ns, fit_ns, rate_after_fine, rate_before_fine);
}

int64_t FitClockRemap::Invert(int64_t straight_ns) const {
  return straight_ns >= at_fit_ns ? straight_ns : Rescale(at_fit_ns, straight_ns, rate_before_fine, rate_after_fine);
}

double FitClockRemap::RateRatio() const {
  const long double f = static_cast<long double>(kFinePerNs);
  return static_cast<double>((f + rate_after_fine) / (f + rate_before_fine));
}

}  // namespace chronolink
