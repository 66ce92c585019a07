// The edge's recent drift: the median of its last windows' own slopes,
// which each window's line leans its slope on (docs/estimator.md §4c). The
// fits run on the nodes' fit clocks, free oscillators that no daemon
// steers, so their relative drift changes slowly; a window's own slope,
// where a load episode leaves its deepest bounds at one end of the span,
// strays by tens of ppb, and the line's value at x0 by that times the
// distance. How far a window follows its own slope is the two slopes'
// variances weighed against each other, as a Kalman gain: the drift's own
// change over the span (the oscillators' wander) against the own slope's
// noise (the path's), both from the span chooser's evidence. Pure: no I/O.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <optional>

#include "agent/estimate/fit_span_chooser.h"
#include "agent/estimate/max_margin_fit.h"

namespace chronolink {

struct EdgeDriftHistoryOptions {
  int windows = 20;     // slopes kept (0: none; the windows' own lines)
  int min_windows = 5;  // fewer since the start or a step: none given
};

class EdgeDriftHistory {
 public:
  explicit EdgeDriftHistory(EdgeDriftHistoryOptions options = {}) : options_(options) {}

  // A window's own slope (LineFit::own_alpha of a max-margin fit).
  void Add(double own_slope);
  // A clock step or a new anchor of a fit clock changes the drift.
  void Reset() { slopes_.clear(); }
  // A fit clock's new rate (fit_clock_remap.h): each kept slope as it reads
  // against the new rate.
  void MapSlopes(const std::function<double(double)>& onto);
  // The median of the kept slopes; none while fewer than min_windows.
  std::optional<double> Slope() const;
  // The prior for a fit over span_ns: the median, and the weight of the
  // window's own slope, w^2 S^2 / (w^2 S^2 + 12 sigma^2 W) for wander w
  // (ns/sqrt(s)), one window's noise sigma (ns), span S and window W (s).
  // None without a median or without evidence (a fixed span).
  std::optional<DriftPrior> PriorFor(const std::optional<FitSpanEvidence>& evidence, int64_t span_ns,
                                     int64_t window_ns) const;

 private:
  EdgeDriftHistoryOptions options_;
  std::deque<double> slopes_;
};

}  // namespace chronolink
