// Per-window estimate of one edge: the max-margin fit on pure pairs, or,
// when a window has too few pure points, the labelled minimum-delay
// fallback (NTP style). Pure: no I/O.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "agent/estimate/max_margin_fit.h"
#include "agent/pair/probe_tuple.h"

namespace chronolink {

enum class EstimatorKind : uint8_t { kNone = 0, kMaxMargin = 1, kMinDelay = 2 };
std::string_view EstimatorKindName(EstimatorKind k);

struct WindowEstimatorOptions {
  int64_t purity_tolerance_ns = 300;
  int min_points_per_side = 8;  // fewer pure upper or lower bounds: fallback
  MaxMarginOptions max_margin;
};

struct WindowEstimate {
  EstimatorKind estimator = EstimatorKind::kNone;
  LineFit fit;                  // fit.ok is false when estimator == kNone
  int tuples = 0;               // complete tuples offered
  int pure_forward = 0;
  int pure_reverse = 0;
};

// Two clocks within ±100 ppm of true time drift apart by at most this.
constexpr double kMaxRelativeDrift = 200e-6;

// Minimum-delay fallback: the tuple with the smallest round trip, offset at
// its midpoint, alpha 0, uncertainty half that round trip plus the drift
// bound over the distance from that tuple to x0.
LineFit FitMinDelay(std::span<const PtPrTuple> tuples, int64_t x0_ns);

WindowEstimate EstimateWindow(std::span<const PtPrTuple> tuples, int64_t x0_ns,
                              const WindowEstimatorOptions& options);

}  // namespace chronolink
