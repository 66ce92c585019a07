// Exact, deterministic max-margin separator in 2-D (Huygens' per-window SVM):
// the line y = beta + alpha (x - x0) that lies below every upper bound and
// above every lower bound with the largest vertical margin. Pure maths: no
// I/O, no clocks. See docs/estimator.md.
#pragma once

#include <cstdint>
#include <optional>
#include <span>

#include "agent/pair/offset_bound.h"

namespace chronolink {

struct MaxMarginOptions {
  // Soft margin: points inside the margin (late or corrupt stamps) are set
  // aside deepest first, at most this many / this fraction of all points,
  // before the window is declared inseparable.
  int max_violators = 32;
  double max_violator_fraction = 0.05;
  // The line's value rests on the mean of this many deepest bounds per side
  // instead of the single deepest (docs/estimator.md §4b): a path's fastest
  // packets scatter below its usual floor, and one of them moved the hard
  // margin's line by half its lead. 1: the hard margin (Huygens). Fewer
  // where a side has under kBoundsPerFloorPoint bounds per floor point.
  int floor_points = 8;
  // The floors' line bisects over only the bounds that can be among the
  // deepest in what is left of its bracket: exact, and checked against
  // every bound at its end. false: over every bound each step (the simple
  // path, which tests compare it with).
  bool prune_floor_candidates = true;
  // A floors' line whose value at x0 lies farther than this many bands
  // (uncertainty_ns) from the hard line's is refused and the hard line kept
  // (docs/estimator.md §4b): every separating line passes within one band,
  // so such a line cuts deep into a side's bounds, as when a starved window's
  // k deepest of one side are queued microseconds above its floor. Measured
  // windows stay under 0.21 (bench/fit_replay.py prints it).
  double max_floor_shift_in_bands = 1.0;
};

// A side needs this many bounds per floor point: with fewer, the deepest
// few are no longer near the floor.
constexpr int kBoundsPerFloorPoint = 16;

struct LineFit {
  bool ok = false;            // false: too few points or inseparable within budget
  int64_t x0_ns = 0;          // reference instant on the local clock
  double alpha = 0.0;         // drift: d(peer - local)/d(local), dimensionless
  double beta_ns = 0.0;       // offset (peer - local) at x0
  double margin_ns = 0.0;     // half the vertical gap the separator keeps clear
  double uncertainty_ns = 0.0;  // half-width of the interval at x0 every separating line passes through
  int violators_removed = 0;  // points set aside by the soft margin
  // Bounds per side whose mean the line's value rests on (1: the hard
  // margin's line; margin_ns and uncertainty_ns are that line's either way).
  int floor_points = 1;
  // The floors' line's offset at x0, at its own slope (before a drift
  // prior), less the hard line's: how far the hard line rested on a few
  // extreme packets (0 with one floor point).
  double floor_shift_ns = 0.0;
  // The floors' line was fitted but lay too far from the hard line
  // (MaxMarginOptions::max_floor_shift_in_bands): the hard line was kept,
  // floor_points is 1 and floor_shift_ns says how far the refused line lay.
  bool floors_refused = false;
  int upper_points = 0;
  int lower_points = 0;
  // Where the caller gave a drift prior (docs/estimator.md §4c): alpha is
  // the prior's slope moved toward this window's own by the prior's weight,
  // beta_ns the floors' means at that slope, and own_alpha the slope this
  // window's bounds alone would take. Otherwise own_alpha == alpha.
  bool drift_prior_taken = false;
  double own_alpha = 0.0;
};

// The edge's recent drift, and how far a window's line follows its own
// slope away from it: own_weight = 0 takes the prior's slope, 1 the own.
struct DriftPrior {
  double slope = 0.0;
  double own_weight = 0.0;
};

// A prior further than this from the window's own slope is not taken: the
// drift changed (a fit clock anchored again that no step marked) and the
// window's own line is the better guess. Loaded windows' own slopes stray
// tens of ppb; two free oscillators change by far less in a minute.
constexpr double kMaxDriftPriorStray = 0.5e-6;

// Fits whose pruned floors' line differed from every bound's at the check
// and were answered by the simple path (0 unless the pruning is wrong).
int64_t FloorCandidateMismatches();

// prior: the edge's recent drift, where the caller knows it (docs/
// estimator.md §4c); the line's value then rests on the floors' means at
// the slope it gives.
LineFit FitMaxMarginLine(std::span<const OffsetBound> upper, std::span<const OffsetBound> lower, int64_t x0_ns,
                         const MaxMarginOptions& options = {}, std::optional<DriftPrior> prior = std::nullopt);

}  // namespace chronolink
