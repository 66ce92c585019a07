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

}  // namespace chronolink
