#include "clock/fit_point.h"

#include "clock/clock_trajectory.h"

namespace chronolink {

int64_t FitPoint::RealtimeMinusFitAt(int64_t at_fit_ns) const {
  return realtime_ns - fit_ns + RoundedQuotient(static_cast<__int128>(at_fit_ns - fit_ns) * rate_fine, kFinePerNs);
}

int64_t FitAnchor::FitOfRaw(int64_t raw) const {
  const int64_t d = raw - raw_ns;
  return realtime_ns + d + RoundedQuotient(static_cast<__int128>(d) * rate_fine, kFinePerNs);
}

int64_t FitAnchor::RawOfFit(int64_t fit_ns) const {
  const int64_t u = fit_ns - realtime_ns;
  return raw_ns + RoundedQuotient(static_cast<__int128>(u) * kFinePerNs, kFinePerNs + static_cast<__int128>(rate_fine));
}

FitPoint PointOnAnchor(const FitPoint& p, const FitAnchor& from, const FitAnchor& to) {
  if (from == to) return p;
  FitPoint out;
  out.fit_ns = to.FitOfRaw(from.RawOfFit(p.fit_ns));
  out.realtime_ns = p.realtime_ns;
  // REALTIME against RAW is (1 + r)(1 + a); against F_to that over (1 + b):
  // in fine units, (F·(r + a − b) + r·a) / (F + b).
  const __int128 f = kFinePerNs, r = p.rate_fine, a = from.rate_fine, b = to.rate_fine;
  out.rate_fine = RoundedQuotient(f * (r + a - b) + r * a, f + b);
  return out;
}

}  // namespace chronolink
