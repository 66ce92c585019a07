// chronolink-solve --timebase: each node's REALTIME/RAW knots (its
// timebase.jsonl, or the leader's cluster-timebase.jsonl) cut into the
// excerpt the leader receives with each window summary, so that the offline
// solve maps back to REALTIME through the knots as the leader does
// (agent/cluster/fit_point_book.h). Without them it maps along each
// window's one fit point, which a daemon's rate change near the instant
// bends away from REALTIME (186 ns at p99 in one 40 s chronyd run).
#pragma once

#include <cstdint>
#include <optional>

#include "clock/fit_point.h"
#include "clock/timebase_knots.h"
#include "trace/correct/timebase_file.h"

namespace chronolink::solve_tool {

// One edge window of a node, on the fit clock it was measured in (edges.jsonl
// `fit_clock`, `window_start_ns`, `window_end_ns`).
struct WindowFitClock {
  uint32_t node = 0;
  FitAnchor anchor;
  int64_t window_start_ns = 0, window_end_ns = 0;  // on F

  friend bool operator==(const WindowFitClock&, const WindowFitClock&) = default;
};

// The node's knots over the window's RAW span: from the knot at or before
// its start through the first at or after its end, all of one stretch (no
// step or restart between). nullopt when no stretch covers the span, or
// the one that does is another boot's (its REALTIME there is not near the
// window's F: RAW restarts at a boot).
std::optional<TimebaseExcerpt> WindowExcerpt(const trace::NodeTimebase& timebase, const WindowFitClock& window);

}  // namespace chronolink::solve_tool
