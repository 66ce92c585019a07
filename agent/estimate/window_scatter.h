// The one-sigma error of an edge's window offsets, from two parts
// (docs/estimator.md §8):
// - The edge's typical noise, from its own recent windows: a parabola
//   fitted (least squares) through the offsets of the last 12 fitted windows
//   stands for the true offset, whose drift changes over those 24 s (or
//   longer, below) only as smoothly as the oscillators wander and the
//   daemons steer, and the windows' scatter about it is the noise of one
//   window. A straight line (until 2026-12-05) counted the clocks' bend
//   over the history as noise: in quiet runs the solved sigma reached 3.24x
//   the median |error|. The scatter is the median absolute residual
//   (x 1.4826, a Gaussian's sigma), so that the one bad window in ten does
//   not widen the next 12 windows' sigma, scaled by 1.3 for tails and for
//   the degree of freedom the parabola takes (1.2 about the line).
// - What tells the bad window apart, in quadrature, each at half weight
//   (a quarter for a window averaged with its later half, below):
//   how far the band of separating lines widens at x0 beyond the
//   separator's own margin (uncertainty_ns - margin_ns), the freedom of the
//   line's slope, large when the probes that bound it lie far from the
//   window's middle; and how far the line on the floors' means moved from
//   the hard line (floor_shift_ns), large when a few packets ran well under
//   the others. Recomputed by bench/sigma_replay.py over ten scenarios of
//   2026-12-05 (docs/estimator.md §8): 3 sigma covered 100 % in each with
//   half of each, the median sigma 1.66-3.04x the median |error|; with the
//   whole excess and no shift 99.3-100 %. With the parabola, over 24
//   scenarios: >= 99.3 % in each, the median sigma <= 3x in 23 (22 with
//   the line). The solve adds a node's own
//   bias, which this per-edge sigma cannot carry
//   (SolverOptions::node_bias_floor_ns).
// The factors were first calibrated on 36 test-bed scenario runs at 4 s
// spans: 3 sigma covered >= 99 % of errors in 34 with the median sigma <= 3x
// the median |error| in 33. A constant bias (delay asymmetry, stamping
// points that differ between the ends) shows in neither and is covered only
// by a floor added in quadrature (4 ns), and by the path asymmetry the
// operator declares.
//
// The max-margin fit's own uncertainty_ns is the half-width of the band of
// separating lines, a bound near half the path's minimum round trip
// whatever the noise: on the test bed 50-180x the error it describes.
// This sigma is what the cluster solve weights by (docs/estimator.md §8).
// Pure: no clocks, no I/O.
#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <vector>

#include "agent/estimate/max_margin_fit.h"
#include "agent/estimate/stalled_band.h"

namespace chronolink {

struct WindowScatterOptions {
  // Windows in the trend, for fits on two windows' span: a longer span
  // stretches it, since overlapping spans share probes and their offsets
  // move together: the trend must hold several disjoint spans or it follows
  // the very error the scatter is to show.
  int history = 12;
  // ...by (span / two windows) to this power: 40 windows (80 s) at 20 s
  // spans. In proportion (1) until the night of 2026-12-06, a 20 s span's
  // parabola took 60 windows (120 s), over which the clocks' own wander
  // (which each window's line follows) strays from any parabola: its
  // scatter was that wander more than the error, and a calm loaded run's
  // sigma stood 3.42x its median |error| (y1). bench/sigma_replay.py (its
  // ninth setting field) over that day's runs: docs/estimator.md §8.
  double history_span_power = 0.75;
  // The trend the windows scatter about: 2, a parabola; 1, a straight line.
  int trend_degree = 2;
  int min_history = 6;               // no sigma before this many (three degrees of freedom)
  double tail_factor = 1.3;          // on the scatter's Gaussian-equivalent sigma
  double band_excess_weight = 0.5;   // on the window's uncertainty_ns - margin_ns
  double floor_shift_weight = 0.5;   // on the window's |floor_shift_ns|
  // On both weights above for a window whose line is the mean of its span's
  // and its later half's (EdgeWindows, docs/estimator.md §10): each line's
  // extreme packets move the mean by half as much. bench/sigma_replay.py over
  // the seven scenarios of 2026-12-05/06 with the half: median sigma <= 3x
  // the median |error| in 5 (3 at 1), 3 sigma 100 % in each; 0.4 met 6 but
  // covered 99.7 % in one.
  double later_half_factor = 0.5;
  // Added in quadrature: bias no scatter reveals. 4 ns since 2026-12-06
  // (5 before): the test bed's idle 2-node runs leaned 0.2-3.3 ns either
  // way over a whole run, and with 5 here and in the solve the idle solved
  // sigma stood over 3x its median |error| in three of seven
  // (docs/estimator.md §8, "Floors of 4 ns").
  double floor_ns = 4;
  // The one-way delay asymmetry the operator expects on the path (fwd - rev
  // within +/- this), invisible to any two-way method: it shifts the offset
  // by up to half of it, counted as a uniform error, sigma = A / (2 sqrt 3),
  // added in quadrature (--path-asymmetry-ns).
  double path_asymmetry_ns = 0;
  // A gap longer than this many windows between two fits restarts the
  // history (the windows on each side may belong to different stretches).
  // Stalled windows are fits: a run of them is no gap, however long.
  int max_gap_windows = 4;
  // A window whose fit's band is over this many times the median of the
  // last band_history windows' is a stalled path's (stalled_band.h): its own
  // sigma sees it, but later windows' trends leave it out. w1's stall
  // (2026-12-06) held two such offsets, 79 and 825 us off, and the parabola
  // through them gave the next 11 windows sigmas of 43-167 us for errors
  // under 150 ns.
  double stalled_band_factor = 8;
  int band_history = 16;
  // A window's sigma is at least this many times the median of the last
  // sigma_memory_windows windows' own sigmas (from sigma_memory_min of them;
  // a stalled window's left out; 0: none). The scatter is taken about a
  // trend, so a slow swing of the path's asymmetry lies on the trend and
  // sigma sees it only through the band's excess and the floors' shift;
  // where those narrowed while a swing lasted, sigma dipped under the error
  // (x3, 2026-12-06: 63 -> 17.7 ns for errors of 90 ns; 3 sigma covered
  // 98.6 %). Replayed by bench/sigma_replay.py over 51 scenarios: 3 sigma
  // >= 99 % in 49 against 45, the median sigma over 3x the median |error|
  // in 8 against 7 (docs/estimator.md §8).
  double sigma_memory = 0.75;
  int sigma_memory_windows = 16;
  int sigma_memory_min = 4;
};

// A window's one-sigma and the part of it both directions of the link share.
// The floor and the declared asymmetry stand for a bias of the link (delay
// asymmetry, stamping points), which a → b and b → a see alike; the scatter
// is each direction's own noise, independent between the two. The cluster
// solve correlates the two directions of a link by shared_ns
// (docs/solver.md).
struct WindowSigma {
  double sigma_ns = 0;
  double shared_ns = 0;  // <= sigma_ns
  // The scatter part alone (tail-scaled): edges.jsonl's sigma_scatter_ns,
  // which bench/sigma_replay.py's `rec` settings re-weigh without a rerun.
  double scatter_ns = 0;
};

// What a window's line is: its span's alone, or the mean of its span's and
// its later half's.
enum class WindowLine { kSpan, kMeanWithLaterHalf };

class WindowScatter {
 public:
  // A trend of degree 1 or 2, and at least three residual degrees of
  // freedom about it, whatever the options ask.
  explicit WindowScatter(int64_t window_ns, WindowScatterOptions options = {})
      : window_ns_(window_ns), options_(options), stall_guard_(options.stalled_band_factor, options.band_history) {
    options_.trend_degree = std::clamp(options_.trend_degree, 1, 2);
    options_.min_history = std::max(options_.min_history, options_.trend_degree + 4);
  }

  // Feeds the fit of the window at x0_ns, on the probes of fit_span_ns (0:
  // two windows); returns its one-sigma, or nullopt while the history is
  // too short. The band and the floors' shift are the span's own fit's.
  std::optional<WindowSigma> Add(int64_t x0_ns, const LineFit& fit, int64_t fit_span_ns = 0,
                                 WindowLine line = WindowLine::kSpan);
  // A clock step or a restart: the windows before it predict nothing.
  void Reset() {
    windows_.clear();
    recent_sigmas_.clear();
    last_x0_ns_.reset();
  }
  // A fit clock's new rate (fit_clock_remap.h): each kept offset as it
  // reads against the new rate, from its window's x0 and offset.
  void MapOffsets(const std::function<double(int64_t, double)>& onto);

 private:
  struct Window {
    int64_t x0_ns;
    double beta_ns;
  };
  std::vector<double> TrendResiduals(int64_t newest_x0_ns, double newest_beta_ns) const;
  // At least sigma_memory times the median of the recent own sigmas; then
  // the window's own joins them (not a stalled one's).
  void KeepMemory(bool stalled, WindowSigma* sigma);
  // Adds the window to the history and gives its sigma.
  std::optional<WindowSigma> SigmaWith(int64_t x0_ns, const LineFit& fit, int64_t fit_span_ns, WindowLine line);

  int64_t window_ns_;
  WindowScatterOptions options_;
  std::deque<Window> windows_;
  std::optional<int64_t> last_x0_ns_;  // the last window fed, a stalled one included
  std::deque<double> recent_sigmas_;  // the last windows' own sigmas (WindowScatterOptions::sigma_memory)
  StalledBandGuard stall_guard_;  // on the windows' fits' bands; a Reset keeps it (the path is the same)
};

}  // namespace chronolink
