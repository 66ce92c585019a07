// Per-window estimate of one edge: the max-margin fit on pure pairs; when a
// window has too few pure points (cross traffic queues one probe of most
// pairs), the max-margin fit on every probe's bound, whose separator rests
// on the probes that met the least queueing; and only when that fails too,
// the labelled minimum-delay fallback (NTP style). Pure: no I/O.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "agent/estimate/max_margin_fit.h"
#include "agent/pair/probe_tuple.h"

namespace chronolink {

enum class EstimatorKind : uint8_t { kNone = 0, kMaxMargin = 1, kMinDelay = 2, kMaxMarginAll = 3 };
std::string_view EstimatorKindName(EstimatorKind k);

struct WindowEstimatorOptions {
  int64_t purity_tolerance_ns = 300;
  int min_points_per_side = 8;  // fewer pure upper or lower bounds: fallback
  // Before the min-delay fallback, the max-margin fit on every probe.
  bool every_bound_fallback = true;
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
// (queueing only loosens a bound). Both probes of a pair count.
void ExtractEveryBound(const PtPrTuple& t, std::vector<OffsetBound>* upper, std::vector<OffsetBound>* lower);

// Two clocks within ±100 ppm of true time drift apart by at most this.
constexpr double kMaxRelativeDrift = 200e-6;

// Minimum-delay fallback: the tuple with the smallest round trip, offset at
// its midpoint, alpha 0, uncertainty half that round trip plus the drift
// bound over the distance from that tuple to x0.
LineFit FitMinDelay(std::span<const PtPrTuple> tuples, int64_t x0_ns);

WindowEstimate EstimateWindow(std::span<const PtPrTuple> tuples, int64_t x0_ns,
                              const WindowEstimatorOptions& options);

}  // namespace chronolink
