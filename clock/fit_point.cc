#include "clock/fit_point.h"

#include "clock/clock_trajectory.h"

namespace chronolink {

int64_t FitPoint::RealtimeMinusFitAt(int64_t at_fit_ns) const {
  return realtime_ns - fit_ns + RoundedQuotient(static_cast<__int128>(at_fit_ns - fit_ns) * rate_fine, kFinePerNs);
}

}  // namespace chronolink
