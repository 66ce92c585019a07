// Per-window estimate of one edge: the max-margin fit on every probe's
// bound, pure pair or not (docs/estimator.md §1, §6). Queueing only loosens
// a bound, so every bound holds, the separator rests on the probes that met
// the least queueing, and more valid bounds can only narrow the band: on the
// test bed it erred 0.036 us p99 on the routed path against 0.17-0.27 us for
// the fit on pure pairs alone. When it fails (too many points inside the
// margin: corrupt stamps) the fit on pure pairs (max_margin_pure), whose
// purity test screens such stamps out; then the labelled minimum-delay
// fallback (NTP style). Pure: no I/O.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "agent/estimate/max_margin_fit.h"
#include "agent/pair/probe_tuple.h"

namespace chronolink {

enum class EstimatorKind : uint8_t { kNone = 0, kMaxMargin = 1, kMinDelay = 2, kMaxMarginPure = 3 };
std::string_view EstimatorKindName(EstimatorKind k);

struct WindowEstimatorOptions {
  int64_t purity_tolerance_ns = 300;
  int min_points_per_side = 8;  // fewer pure upper or lower bounds: fallback
  // false: the fit on pure pairs first (Huygens' way), then min-delay; for
  // comparisons (--estimate-points pure).
  bool fit_every_probe = true;
  MaxMarginOptions max_margin;
};

struct WindowEstimate {
  EstimatorKind estimator = EstimatorKind::kNone;
  LineFit fit;                  // fit.ok is false when estimator == kNone
  int tuples = 0;               // complete tuples offered
  int pure_forward = 0;
  int pure_reverse = 0;
};

// Every probe's bound, pure or not: a forward probe's (rx - tx) bounds the
// offset from above, a reverse probe's from below, whatever queueing it met
// (queueing only loosens a bound). Both probes of a pair count. A probe
// with a stamp missing gives none.
void ExtractEveryBound(const PtPrTuple& t, std::vector<OffsetBound>* upper, std::vector<OffsetBound>* lower);

// Two clocks within ±100 ppm of true time drift apart by at most this.
constexpr double kMaxRelativeDrift = 200e-6;

// Minimum-delay fallback: the tuple with the smallest round trip, offset at
// its midpoint, alpha 0, uncertainty half that round trip plus the drift
// bound over the distance from that tuple to x0.
LineFit FitMinDelay(std::span<const PtPrTuple> tuples, int64_t x0_ns);

// prior: the edge's recent drift, which the max-margin fits lean their
// slope on (FitMaxMarginLine; docs/estimator.md §4c).
WindowEstimate EstimateWindow(std::span<const PtPrTuple> tuples, int64_t x0_ns, const WindowEstimatorOptions& options,
                              std::optional<DriftPrior> prior = std::nullopt);

}  // namespace chronolink
