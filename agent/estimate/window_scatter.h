// The one-sigma error of an edge's window offsets, measured from the edge's
// own recent windows: a straight line fitted (least squares) through the
// offsets of the last 12 fitted windows stands for the true offset, whose
// drift is constant over those 24 s to well below the noise, and the scatter
// of the windows about it, sqrt(RSS / (n - 2)), is the noise of one window.
// Clock wander the line does not follow shows up in it too, as it should.
// The errors have heavier tails than a Gaussian's (a window whose probes all
// met some queueing), so the scatter is scaled by 1.4: calibrated on the
// test bed's runs to cover >= 99 % of errors at 3 sigma while the median
// sigma stays 1.3-3x the median |error| (docs/PERFORMANCE.md §3). A
// constant bias (delay asymmetry, stamping points that differ between the
// ends) shows in no scatter and is covered only by a 5 ns floor added in
// quadrature, and by the path asymmetry the operator declares.
//
// The max-margin fit's own uncertainty_ns is the half-width of the band of
// separating lines, a bound near half the path's minimum round trip
// whatever the noise: on the test bed 50-180x the error it describes.
// This sigma is what the cluster solve weights by (docs/estimator.md §8).
// Pure: no clocks, no I/O.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>

#include "agent/estimate/max_margin_fit.h"

namespace chronolink {

struct WindowScatterOptions {
  int history = 12;       // windows in the line
  int min_history = 5;    // no sigma before this many (three degrees of freedom)
  double tail_factor = 1.4;
  double floor_ns = 5;    // added in quadrature: bias no scatter reveals
  // The one-way delay asymmetry the operator expects on the path (fwd - rev
  // within +/- this), invisible to any two-way method: it shifts the offset
  // by up to half of it, counted as a uniform error, sigma = A / (2 sqrt 3),
  // added in quadrature (--path-asymmetry-ns).
  double path_asymmetry_ns = 0;
  // A gap longer than this many windows between two fits restarts the
  // history (the windows on each side may belong to different stretches).
  int max_gap_windows = 4;
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
};

class WindowScatter {
 public:
  explicit WindowScatter(int64_t window_ns, WindowScatterOptions options = {})
      : window_ns_(window_ns), options_(options) {}

  // Feeds the fit of the window at x0_ns; returns its one-sigma, or nullopt
  // while the history is too short.
  std::optional<WindowSigma> Add(int64_t x0_ns, const LineFit& fit);
  // A clock step or a restart: the windows before it predict nothing.
  void Reset() { windows_.clear(); }

 private:
  struct Window {
    int64_t x0_ns;
    double beta_ns;
  };
  int64_t window_ns_;
  WindowScatterOptions options_;
  std::deque<Window> windows_;
};

}  // namespace chronolink
