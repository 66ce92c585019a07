#include "agent/estimate/window_estimator.h"

#include <cmath>
#include <optional>
#include <vector>

#include "agent/pair/probe_pair_filter.h"

namespace chronolink {

std::string_view EstimatorKindName(EstimatorKind k) {
  switch (k) {
    case EstimatorKind::kNone:
      return "none";
    case EstimatorKind::kMaxMargin:
      return "max_margin";
    case EstimatorKind::kMinDelay:
      return "min_delay";
    case EstimatorKind::kMaxMarginPure:
      return "max_margin_pure";
  }
  return "none";
}

LineFit FitMinDelay(std::span<const PtPrTuple> tuples, int64_t x0_ns) {
  LineFit fit;
  fit.x0_ns = x0_ns;
  const PtPrTuple* best = nullptr;
  int64_t best_rtt = 0;
  for (const PtPrTuple& t : tuples) {
    if (!t.complete()) continue;
    // Round trip on each clock separately: prober time between sending the
    // forward probe and receiving the reverse one, minus the responder's
    // turnaround. Only same-clock differences.
    const int64_t rtt = (t.rev_rx[0].ns - t.fwd_tx[0].ns) - (t.rev_tx[0].ns - t.fwd_rx[0].ns);
    if (rtt < 0) continue;  // impossible stamps (corrupt or mismatched): never the "best"
    // Deterministic tie-break: smallest RTT, then earliest send, then lowest seq.
    if (best == nullptr || rtt < best_rtt ||
        (rtt == best_rtt && (t.fwd_tx[0].ns < best->fwd_tx[0].ns ||
                             (t.fwd_tx[0].ns == best->fwd_tx[0].ns && t.seq < best->seq)))) {
      best = &t;
      best_rtt = rtt;
    }
  }
  if (best == nullptr) return fit;
  const int64_t fwd = best->fwd_rx[0].ns - best->fwd_tx[0].ns;  // offset + forward delay
  const int64_t rev = best->rev_tx[0].ns - best->rev_rx[0].ns;  // offset - reverse delay
  fit.ok = true;
  fit.alpha = 0.0;
  fit.beta_ns = (static_cast<double>(fwd) + static_cast<double>(rev)) / 2.0;
  fit.margin_ns = 0.0;
  // The offset holds at the tuple, not at x0: between them the two clocks
  // may drift apart by up to kMaxRelativeDrift, which the flat line cannot
  // follow. Saying so keeps the solver from trusting it like a fit.
  const int64_t tuple_mid = best->fwd_tx[0].ns + (best->rev_rx[0].ns - best->fwd_tx[0].ns) / 2;
  const double distance = std::abs(static_cast<double>(tuple_mid - x0_ns));
  fit.uncertainty_ns = static_cast<double>(best_rtt) / 2.0 + distance * kMaxRelativeDrift;
  fit.upper_points = 1;
  fit.lower_points = 1;
  return fit;
}

void ExtractEveryBound(const PtPrTuple& t, std::vector<OffsetBound>* upper, std::vector<OffsetBound>* lower) {
  for (int i = 0; i < 2; ++i) {
    if (t.fwd_tx[i].present() && t.fwd_rx[i].present()) {
      upper->push_back({t.fwd_tx[i].ns, t.fwd_rx[i].ns - t.fwd_tx[i].ns});
    }
    if (t.rev_tx[i].present() && t.rev_rx[i].present()) {
      lower->push_back({t.rev_rx[i].ns, t.rev_tx[i].ns - t.rev_rx[i].ns});
    }
  }
}

namespace {

// The max-margin fit on every probe of the window; nullopt when a side has
// fewer than min_side bounds.
std::optional<LineFit> FitEveryBound(std::span<const PtPrTuple> tuples, int64_t x0_ns,
                                     const WindowEstimatorOptions& options, int min_side,
                                     std::optional<DriftPrior> prior) {
  std::vector<OffsetBound> upper, lower;
  upper.reserve(2 * tuples.size());
  lower.reserve(2 * tuples.size());
  for (const PtPrTuple& t : tuples) ExtractEveryBound(t, &upper, &lower);
  if (static_cast<int>(upper.size()) < min_side || static_cast<int>(lower.size()) < min_side) return std::nullopt;
  return FitMaxMarginLine(upper, lower, x0_ns, options.max_margin, prior);
}

}  // namespace

WindowEstimate EstimateWindow(std::span<const PtPrTuple> tuples, int64_t x0_ns, const WindowEstimatorOptions& options,
                              std::optional<DriftPrior> prior) {
  WindowEstimate est;
  est.fit.x0_ns = x0_ns;
  const ProbePairFilter filter(options.purity_tolerance_ns);
  std::vector<OffsetBound> upper, lower;
  upper.reserve(tuples.size());
  lower.reserve(tuples.size());
  for (const PtPrTuple& t : tuples) {
    if (t.complete()) ++est.tuples;
    // A pure half of an incomplete tuple (its other direction lost) is still
    // a valid bound.
    filter.Extract(t, &upper, &lower);
  }
  est.pure_forward = static_cast<int>(upper.size());
  est.pure_reverse = static_cast<int>(lower.size());

  const int min_side = options.min_points_per_side < 2 ? 2 : options.min_points_per_side;
  LineFit tried;  // the last fit tried, whose margin and violators say why it failed
  bool any_tried = false;
  if (options.fit_every_probe) {
    const std::optional<LineFit> every = FitEveryBound(tuples, x0_ns, options, min_side, prior);
    any_tried = every.has_value();
    if (every) tried = *every;
    if (tried.ok) {
      est.estimator = EstimatorKind::kMaxMargin;
      est.fit = tried;
      return est;
    }
  }
  if (est.pure_forward >= min_side && est.pure_reverse >= min_side) {
    any_tried = true;
    tried = FitMaxMarginLine(upper, lower, x0_ns, options.max_margin, prior);
    if (tried.ok) {
      est.estimator = options.fit_every_probe ? EstimatorKind::kMaxMarginPure : EstimatorKind::kMaxMargin;
      est.fit = tried;
      return est;
    }
  }
  LineFit fallback = FitMinDelay(tuples, x0_ns);
  if (fallback.ok) {
    est.estimator = EstimatorKind::kMinDelay;
    est.fit = fallback;
    return est;
  }
  // Nothing usable: keep the failed max-margin fit (its margin and violator
  // count say why) when one was tried, else the failed fallback.
  est.estimator = EstimatorKind::kNone;
  est.fit = any_tried ? tried : fallback;
  est.fit.x0_ns = x0_ns;
  return est;
}

}  // namespace chronolink
