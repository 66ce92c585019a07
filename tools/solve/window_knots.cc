#include "tools/solve/window_knots.h"

#include <algorithm>
#include <cstdlib>
#include <vector>

namespace chronolink::solve_tool {
namespace {

// F stays within the fit clock's re-anchor bound (20 ms by default) of
// REALTIME; another boot's stretch at the same RAW is hours or days away.
constexpr int64_t kSameBootNs = 1'000'000'000;

// REALTIME at `raw_ns` along the stretch's chords; raw_ns within its knots.
int64_t RealtimeAtRaw(const std::vector<trace::TimebasePoint>& knots, int64_t raw_ns) {
  auto after = std::lower_bound(knots.begin(), knots.end(), raw_ns,
                                [](const trace::TimebasePoint& k, int64_t v) { return k.raw_ns < v; });
  if (after == knots.begin()) return knots.front().realtime_ns;
  const trace::TimebasePoint& b = *after;
  const trace::TimebasePoint& a = *std::prev(after);
  const __int128 num = static_cast<__int128>(raw_ns - a.raw_ns) * (b.realtime_ns - a.realtime_ns);
  return a.realtime_ns + RoundedQuotient(num, b.raw_ns - a.raw_ns);
}

}  // namespace

std::optional<TimebaseExcerpt> WindowExcerpt(const trace::NodeTimebase& timebase, const WindowFitClock& window) {
  const int64_t raw_from = window.anchor.RawOfFit(window.window_start_ns);
  const int64_t raw_to = window.anchor.RawOfFit(window.window_end_ns);
  for (const trace::TimebaseStretch& stretch : timebase.stretches) {
    const auto& knots = stretch.knots;
    if (knots.size() < 2 || knots.front().raw_ns > raw_from || knots.back().raw_ns < raw_to) continue;
    if (std::llabs(RealtimeAtRaw(knots, raw_from) - window.window_start_ns) > kSameBootNs) continue;
    // The last knot at or before the start, through the first at or after the end.
    auto first = std::upper_bound(knots.begin(), knots.end(), raw_from,
                                  [](int64_t v, const trace::TimebasePoint& k) { return v < k.raw_ns; });
    first = std::prev(first);
    auto last = std::lower_bound(knots.begin(), knots.end(), raw_to,
                                 [](const trace::TimebasePoint& k, int64_t v) { return k.raw_ns < v; });
    TimebaseExcerpt excerpt;
    for (auto it = first; it <= last; ++it) excerpt.knots.push_back({it->raw_ns, it->realtime_ns, false});
    if (excerpt.knots.size() < 2) return std::nullopt;  // an empty window
    return excerpt;
  }
  return std::nullopt;
}

}  // namespace chronolink::solve_tool
