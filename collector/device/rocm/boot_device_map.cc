#include "collector/device/rocm/boot_device_map.h"

#include <algorithm>
#include <cmath>

namespace chronolink::collector {
namespace {

// a.device + (boot - a.boot) * slope, the slope from a to b (1 when a is b).
int64_t Along(const BootDevicePair& a, const BootDevicePair& b, int64_t boot_ns) {
  const __int128 dx = static_cast<__int128>(boot_ns) - a.boot_ns;
  if (b.boot_ns == a.boot_ns) return static_cast<int64_t>(a.device_ns + dx);
  const __int128 num = dx * (static_cast<__int128>(b.device_ns) - a.device_ns);
  const __int128 den = static_cast<__int128>(b.boot_ns) - a.boot_ns;
  // Round to nearest, ties away from zero.
  const __int128 q = (num >= 0 ? num + den / 2 : num - den / 2) / den;
  return static_cast<int64_t>(a.device_ns + q);
}

int64_t RateTerm(int64_t distance_ns, int64_t ppm) {
  return static_cast<int64_t>(std::ceil(static_cast<double>(distance_ns) * static_cast<double>(ppm) / 1e6));
}

}  // namespace

std::optional<int64_t> TicksToNs(uint64_t ticks, uint64_t hz) {
  if (hz == 0) return std::nullopt;
  const unsigned __int128 ns = static_cast<unsigned __int128>(ticks) * 1'000'000'000u / hz;
  if (ns > static_cast<unsigned __int128>(INT64_MAX)) return std::nullopt;
  return static_cast<int64_t>(ns);
}

bool BootDeviceMap::Add(const BootDevicePair& pair) {
  if (!pairs_.empty() && (pair.boot_ns <= pairs_.back().boot_ns || pair.device_ns <= pairs_.back().device_ns)) {
    return false;
  }
  pairs_.push_back(pair);
  if (pairs_.size() > options_.max_pairs) pairs_.pop_front();
  return true;
}

bool BootDeviceMap::ToDevice(int64_t boot_ns, int64_t* device_ns, int64_t* error_ns, std::string* why) const {
  if (pairs_.empty()) {
    *why = "no GPU counter / BOOTTIME pair yet (the sampler has not read this device)";
    return false;
  }
  const auto after = std::lower_bound(pairs_.begin(), pairs_.end(), boot_ns,
                                      [](const BootDevicePair& p, int64_t t) { return p.boot_ns < t; });
  if (after != pairs_.end() && after != pairs_.begin()) {  // between two pairs (or on one)
    const BootDevicePair& a = *(after - 1);
    const BootDevicePair& b = *after;
    *device_ns = Along(a, b, boot_ns);
    *error_ns = std::max(a.error_ns, b.error_ns) +
                RateTerm(std::min(boot_ns - a.boot_ns, b.boot_ns - boot_ns), options_.rate_tolerance_ppm);
    return true;
  }
  // Outside: the nearest pair and the slope of the nearest two.
  const bool before_first = after == pairs_.begin();
  const BootDevicePair& edge = before_first ? pairs_.front() : pairs_.back();
  const BootDevicePair& other =
      pairs_.size() < 2 ? edge : (before_first ? pairs_[1] : pairs_[pairs_.size() - 2]);
  const int64_t distance = before_first ? edge.boot_ns - boot_ns : boot_ns - edge.boot_ns;
  if (distance > options_.max_extrapolation_ns) {
    *why = "BOOTTIME " + std::to_string(boot_ns) + " lies " + std::to_string(distance / 1'000'000) +
           " ms " + (before_first ? "before the first" : "after the last") +
           " GPU counter pair (limit " + std::to_string(options_.max_extrapolation_ns / 1'000'000) + " ms)";
    return false;
  }
  *device_ns = before_first ? Along(edge, other, boot_ns) : Along(other, edge, boot_ns);
  *error_ns = edge.error_ns + RateTerm(distance, options_.rate_tolerance_ppm);
  return true;
}

}  // namespace chronolink::collector
