// The rule for how long a window's fit reaches, which the agent's config and
// chronolink-sim share (docs/estimator.md §10): a span > 0 is fixed; 0 has
// each edge choose it (fit_span_chooser.h) from two windows up to a longest,
// by default ten windows. Spans up to three windows (6 s of 2 s windows:
// docs/estimator.md §10 says why not six any more) are centred on their
// window; a longer one ends where the longest centred one ends and reaches
// further back only, so a record comes no later for it: a loaded path's
// fits gain the probes of 4 s more without the solution's lag growing.
// Pure arithmetic.
#pragma once

#include <algorithm>
#include <cstdint>

namespace chronolink {

// The longest centred span a chosen one takes unless told, in windows.
constexpr int64_t kDefaultLongestWindows = 3;
// The longest span, reaching back, a chosen one takes unless told, in
// windows. Replayed over ten loaded runs of 2026-12-05 with each window's
// own slope, 5 cut the edge p99 by 1-18 ns in each, and 6 erred 12 ns more
// than 5 in one. With the line's slope leaning on the edge's drift (§4c),
// a long span gains the floors of more seconds and no longer rests its
// slope on them alone: replayed over eight runs of 2026-12-06, 10 (20 s)
// cut the p99 in seven, by up to 87 ns (docs/estimator.md §10).
constexpr int64_t kDefaultLongestTrailingWindows = 10;
// The longest any span may reach, in windows: the tuples a window's fit
// takes stay in memory that long.
constexpr int64_t kMaxTrailingWindows = 16;

struct FitSpanRange {
  bool chosen = true;
  int64_t shortest_ns = 0;
  // The longest centred span: what sets when a window's record comes,
  // (longest - window) / 2 after its end, whatever span it took.
  int64_t longest_ns = 0;
  // The longest span of all (>= longest_ns); one over longest_ns ends where
  // the longest centred span ends.
  int64_t longest_trailing_ns = 0;
  // Where a chosen span starts before any evidence: 0 for
  // FitSpanChooser::StartSpan's rule (chronolink-sim may set it to measure
  // the rule; the agent does not).
  int64_t start_ns = 0;
  // A chosen span longer than the longest centred one gives the mean of two
  // lines: its own and its later half's (LaterHalfNs). A path's slow delay
  // asymmetry moves the two apart; their mean weighs the seconds nearest
  // the window twice, a smoother kernel than either span's. Replayed over
  // 26 test-bed runs of 2026-12-05/06, the mean of 20 s and 10 s cut the
  // edge p99 in 20, raised it in 5 (over the first 19: loaded mean p99
  // 59.6 -> 54.4 ns, worst 111 -> 93; idle 40.7 -> 32.8; docs/estimator.md
  // §10).
  bool later_half = true;

  // The later half a span of span_ns is averaged with (0: none): half of
  // it in whole windows, at least the longest centred span.
  int64_t LaterHalfNs(int64_t span_ns, int64_t window_ns) const {
    if (!chosen || !later_half || span_ns <= longest_ns || window_ns <= 0) return 0;
    return std::max(longest_ns, span_ns / 2 / window_ns * window_ns);
  }

  // Always this span (never under the window's own: EdgeWindows' rule).
  static FitSpanRange Fixed(int64_t span_ns) { return {false, span_ns, span_ns, span_ns, 0, false}; }

  // max_span_ns, trailing_max_ns: 0 for the defaults; a trailing longest
  // under the centred one is the centred one (no span reaches back).
  static FitSpanRange Of(int64_t window_ns, int64_t fit_span_ns, int64_t max_span_ns, int64_t trailing_max_ns = 0) {
    if (fit_span_ns > 0) return Fixed(std::max(fit_span_ns, window_ns));
    const int64_t longest = max_span_ns > 0 ? max_span_ns : kDefaultLongestWindows * window_ns;
    const int64_t trailing = trailing_max_ns > 0 ? trailing_max_ns : kDefaultLongestTrailingWindows * window_ns;
    return {true, std::min(2 * window_ns, longest), longest, std::max(trailing, longest), 0, true};
  }
};

}  // namespace chronolink
