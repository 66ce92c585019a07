// Anchored placement of HIP events (hip_region_math.h).
#include "collector/device/rocm/hip_region_math.h"

#include <cmath>
#include <limits>

namespace chronolink::collector {

namespace {

constexpr double kNsPerMs = 1e6;
constexpr int64_t kPpmDenominator = 1'000'000;
// |elapsed| beyond this (about 1 day) is not a region, it is garbage.
constexpr double kMaxElapsedMs = 86'400'000.0;

int64_t RateAllowance(int64_t span_ns, int64_t ppm) {
  const int64_t span = span_ns < 0 ? -span_ns : span_ns;
  return static_cast<int64_t>((static_cast<__int128>(span) * ppm + kPpmDenominator - 1) / kPpmDenominator);
}

}  // namespace

int64_t FloatMsUlpNs(float ms) {
  const float magnitude = std::fabs(ms);
  const float next = std::nextafter(magnitude, std::numeric_limits<float>::infinity());
  const double ulp_ns = (static_cast<double>(next) - static_cast<double>(magnitude)) * kNsPerMs;
  const int64_t ns = static_cast<int64_t>(std::ceil(ulp_ns));
  return ns < 1 ? 1 : ns;
}

bool PlaceEvent(const RegionAnchor& anchor, float elapsed_ms, const EventTimingModel& model,
                PlacedInstant* out) {
  if (!std::isfinite(elapsed_ms) || std::fabs(elapsed_ms) > kMaxElapsedMs) return false;
  // A difference, not an epoch instant: safe in a double.
  const int64_t elapsed_ns = static_cast<int64_t>(std::llround(static_cast<double>(elapsed_ms) * kNsPerMs));
  int64_t device_ns = 0;
  if (__builtin_add_overflow(anchor.device_ns, elapsed_ns, &device_ns)) return false;
  out->device_ns = device_ns;
  out->error_ns = anchor.half_width_ns + FloatMsUlpNs(elapsed_ms) + model.event_clock_error_ns +
                  RateAllowance(elapsed_ns, model.rate_tolerance_ppm);
  return true;
}

const RegionAnchor* AnchorBefore(std::span<const RegionAnchor> anchors, int64_t event_floor_ns) {
  const RegionAnchor* best = nullptr;
  for (const RegionAnchor& a : anchors) {
    if (a.bracket_end_ns <= event_floor_ns) best = &a;
  }
  return best;
}

const char* RegionImplausible(const PlacedInstant& begin, const PlacedInstant& end, int64_t floor_ns,
                              int64_t ceiling_ns) {
  if (floor_ns != std::numeric_limits<int64_t>::min() && begin.device_ns + begin.error_ns < floor_ns) {
    return "begin event placed before it was recorded";
  }
  if (ceiling_ns != std::numeric_limits<int64_t>::max() && end.device_ns - end.error_ns > ceiling_ns) {
    return "end event placed after it was seen complete";
  }
  if (end.device_ns + end.error_ns + begin.error_ns < begin.device_ns) return "end event before begin";
  return nullptr;
}

}  // namespace chronolink::collector
