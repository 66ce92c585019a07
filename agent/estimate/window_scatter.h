// The one-sigma error of an edge's window offsets, measured from the edge's
// own recent windows. Each fitted window, carried over the gap by its
// drift, predicts the next window's offset; two windows with independent
// errors of sigma miss each other by sqrt(2) sigma, so the RMS of the
// recent misses over sqrt(2) is the window-to-window noise of the estimate.
// Clock wander the linear model does not follow shows up in it too, as it
// should. What no scatter shows, a constant bias (delay asymmetry, a
// stamping point that differs between the ends), is covered only by the
// floor: the result is sqrt(noise^2 + floor^2).
//
// The max-margin fit's own uncertainty_ns is the half-width of the band of
// separating lines, a bound that is roughly half the path's minimum round
// trip whatever the noise: on the test bed 20-40x the error it describes.
// This sigma is what the cluster solve weights by (docs/estimator.md §8).
// Pure: no clocks, no I/O.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>

#include "agent/estimate/max_margin_fit.h"

namespace chronolink {

struct WindowScatterOptions {
  int history = 16;       // misses kept
  int min_history = 4;    // no sigma before this many
  double floor_ns = 10;   // added in quadrature: bias no scatter reveals
  // A gap longer than this many windows between two fits restarts the
  // history (the drift carried across it would dominate the miss).
  int max_gap_windows = 4;
};

class WindowScatter {
 public:
  explicit WindowScatter(int64_t window_ns, WindowScatterOptions options = {})
      : window_ns_(window_ns), options_(options) {}

  // Feeds the fit of the window at x0_ns; returns its one-sigma, or nullopt
  // while the history is too short.
  std::optional<double> Add(int64_t x0_ns, const LineFit& fit);
  // A clock step or a restart: the windows before it predict nothing.
  void Reset();

 private:
  int64_t window_ns_;
  WindowScatterOptions options_;
  bool have_last_ = false;
  int64_t last_x0_ns_ = 0;
  double last_beta_ns_ = 0;
  double last_alpha_ = 0;
  std::deque<double> misses_;  // ns
};

}  // namespace chronolink
