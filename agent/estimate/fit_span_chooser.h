// How long a span each window's fit of one edge should take, from what the
// edge's own windows show (docs/estimator.md §10). A longer span gives the
// fit more pairs, so less noise, but the line then has to follow the clocks
// for longer, and clock wander it cannot follow adds error:
//   variance(S) = noise_W^2 * W / S  +  0.15 * w^2 * S
// for a span S, the window W, the noise of a fit on one window's own probes
// noise_W, and the wander w (ns/sqrt(s), a random walk of the offset):
// chronolink-sim measured a span's wander error as p99 = w sqrt(S), a
// Gaussian's 0.15 w^2 S. The noise term assumes a fit's variance falls only
// as 1 / pairs; the max-margin line rests on the least-queued probes and
// does better, so the model errs towards shorter spans.
//
// Both unknowns come from the same fits: every window is also fitted on its
// own probes alone (disjoint windows, independent errors), and the second
// differences of those offsets at lag m windows,
//   D2(m) = beta[k+m] - 2 beta[k] + beta[k-m],
// have variance 6 noise_W^2 + 2 w^2 m W: a constant drift cancels, the
// noise does not grow with the lag, the wander does. A least-squares line
// through their variances (mean squares, clipped at 4 sigma against a bad
// window; each weighted by its precision) at lags 1, 2, 4 and 8 over the
// last 128 windows gives both.
//
// The span is chosen on the wander the evidence shows beyond doubt: the
// line's slope less two of its standard errors (wander_lower_ns_per_sqrt_s).
// Where the wander is small beside the noise, as on the test bed (a true
// 6 ns/sqrt(s) under 25-120 ns of window noise), 128 windows cannot measure
// it: the estimate swung from 0 up to 13-52 ns/sqrt(s) within a run, and load
// episodes of 2-6 s (noise correlated over two or three windows, which
// lag 1 sees less of than the longer lags) read as wander. The chooser
// then took 4 s spans for minutes after an episode, and those windows held
// the worst errors (2026-12-06: 190 ns). A clock that does wander still
// gets short spans once its walk is beyond doubt, but later: chronolink-sim's
// 5-50 ns/sqrt(s) under a few ns of noise after 16-40 windows, at 30-40 %
// more p99 over a 4-minute run (docs/estimator.md §10).
// The span minimising variance(S), in whole windows within [min, max], is
// taken once it beats the current span's by a tenth.
//
// Until 16 windows are in (32 s of 2 s windows) it cannot know which term
// rules, so it starts at the longest span, as it would stay without
// evidence of wander: replayed on the loaded runs of 2026-12-06 with 4-20 s
// spans, starting at 6 s erred up to 23 ns more at p99 in five of six, the
// largest errors of a run falling in its first windows (docs/estimator.md
// §10).
// Pure: no clocks, no I/O.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <optional>

#include "agent/estimate/fit_span_range.h"
#include "agent/estimate/max_margin_fit.h"

namespace chronolink {

struct FitSpanChooserOptions {
  int64_t min_span_ns = 4'000'000'000;
  int64_t max_span_ns = kDefaultLongestTrailingWindows * 2'000'000'000;  // of 2 s windows

  // Before any evidence: 0 for StartSpan's, else this (within min..max).
  int64_t start_span_ns = 0;
  // The span rests on the wander estimate less this many standard errors.
  double wander_doubt_sigmas = 2;
  int history = 128;     // own-window fits kept (256 s of 2 s windows)
  int min_history = 16;  // no choice before this many
  double switch_gain = 1.1;  // the new span's variance must beat the current's by this factor
  // ... in this many windows in a row, each wanting a longer (or each a
  // shorter) span: one window's estimate from a short history is noisy.
  // Two, replayed on 23 test-bed scenarios, erred 4 ns less in one and
  // 11 ns more in another (docs/estimator.md §10): not kept.
  int confirm_windows = 4;
};

// The chooser an edge with these spans needs: none where the span is fixed,
// else one that chooses between the shortest and the longest.
inline std::optional<FitSpanChooserOptions> ChooserOptionsFor(const FitSpanRange& spans) {
  if (!spans.chosen) return std::nullopt;
  FitSpanChooserOptions o;
  o.min_span_ns = spans.shortest_ns;
  o.max_span_ns = spans.longest_trailing_ns;
  o.start_span_ns = spans.start_ns;
  return o;
}

// What the last choice rested on (edges.jsonl, the agent's log).
struct FitSpanEvidence {
  double window_noise_ns = 0;        // one-sigma of a fit on one window's own probes
  double wander_ns_per_sqrt_s = 0;   // the offset's random walk
  // ... less wander_doubt_sigmas standard errors (>= 0): what the span rests on.
  double wander_lower_ns_per_sqrt_s = 0;
  int64_t best_span_ns = 0;          // variance(S)'s minimum, in whole windows within the range
  int windows = 0;                   // own-window fits it rests on
};

class FitSpanChooser {
 public:
  FitSpanChooser(int64_t window_ns, FitSpanChooserOptions options);

  // Feeds the fit of the window at x0_ns on its own probes (a failed fit is
  // skipped; a gap of more than 4 windows restarts the history). Returns
  // true when the span changed.
  bool Add(int64_t x0_ns, const LineFit& own_window_fit);
  // A clock step (REALTIME's, or the fit clock jumping back to it): the offsets
  // before it predict nothing of those after, so the history starts again;
  // the span and its evidence stay, as the step changed neither the path's
  // noise nor the clocks' wander, and the spans beside it are cut at it.
  void AfterClockStep();
  // A fit clock's new rate (fit_clock_remap.h): each kept offset as it
  // reads against the new rate, from its window's x0 and offset. The
  // evidence stands: a line added to every offset leaves their second
  // differences as they were.
  void MapOffsets(const std::function<double(int64_t, double)>& onto);

  int64_t span_ns() const { return span_ns_; }
  // The span before any evidence: the longest (see the top of this file).
  static int64_t StartSpan(int64_t window_ns, int64_t min_span_ns, int64_t max_span_ns);
  const std::optional<FitSpanEvidence>& evidence() const { return evidence_; }
  // The model above: predicted variance of a fit on a span of span_ns, for
  // the wander the evidence shows beyond doubt.
  static double SpanVariance(const FitSpanEvidence& e, int64_t window_ns, int64_t span_ns);

 private:
  std::optional<FitSpanEvidence> Estimate() const;

  int64_t window_ns_;
  FitSpanChooserOptions options_;
  int64_t span_ns_;
  struct Fit {
    int64_t x0_ns;
    double beta_ns;
  };
  std::deque<Fit> fits_;
  std::optional<FitSpanEvidence> evidence_;
  int wanting_ = 0;  // windows in a row that wanted a longer (> 0) or shorter (< 0) span
};

}  // namespace chronolink
