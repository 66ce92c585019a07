// The rule for how long a window's fit reaches, which the agent's config and
// chronolink-sim share (docs/estimator.md §10): a span > 0 is fixed; 0 has
// each edge choose it (fit_span_chooser.h) from two windows up to a longest,
// by default three windows (6 s of 2 s windows: docs/estimator.md §10 says
// why not six any more). Pure arithmetic.
#pragma once

#include <algorithm>
#include <cstdint>

namespace chronolink {

// The longest span a chosen one takes unless told, in windows.
constexpr int64_t kDefaultLongestWindows = 3;

struct FitSpanRange {
  bool chosen = true;
  int64_t shortest_ns = 0;
  // What sets when a window's record comes: (longest - window) / 2 after
  // its end, whatever span it took.
  int64_t longest_ns = 0;

  // Always this span (never under the window's own: EdgeWindows' rule).
  static FitSpanRange Fixed(int64_t span_ns) { return {false, span_ns, span_ns}; }

  static FitSpanRange Of(int64_t window_ns, int64_t fit_span_ns, int64_t max_span_ns) {
    if (fit_span_ns > 0) return Fixed(std::max(fit_span_ns, window_ns));
    const int64_t longest = max_span_ns > 0 ? max_span_ns : kDefaultLongestWindows * window_ns;
    return {true, std::min(2 * window_ns, longest), longest};
  }
};

}  // namespace chronolink
