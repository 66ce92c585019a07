#include "agent/estimate/probe_cadence.h"

#include <algorithm>
#include <cmath>

namespace chronolink {

bool ProbeCadence::SetInterval(double ns, std::string* why, const std::string& reason) {
  const auto next = static_cast<int64_t>(std::clamp(ns, static_cast<double>(options_.fastest_interval_ns),
                                                    static_cast<double>(options_.slowest_interval_ns)));
  if (next == interval_ns_) return false;
  interval_ns_ = next;
  *why = reason;
  return true;
}

bool ProbeCadence::OnWindow(const WindowEstimate& e, bool clock_step, std::string* why) {
  if (clock_step) return false;
  const double now = static_cast<double>(interval_ns_);
  switch (e.estimator) {
    case EstimatorKind::kNone:
    case EstimatorKind::kMinDelay:
      return SetInterval(now / 2, why, "the window fell back to " + std::string(EstimatorKindName(e.estimator)));
    case EstimatorKind::kMaxMargin:
    case EstimatorKind::kMaxMarginPure:
      break;
  }
  const int pure = std::min(e.pure_forward, e.pure_reverse);
  const bool loaded = pure < kLoadedPurity * std::max(1, e.tuples);
  const bool rests_on_pure_pairs = !(options_.every_probe_fit && e.estimator == EstimatorKind::kMaxMargin);
  if (rests_on_pure_pairs && pure < options_.target_pure_points) {
    if (loaded) return false;
    return SetInterval(now * 0.8, why,
                       std::to_string(pure) + " pure pairs on its thinner side (target " +
                           std::to_string(options_.target_pure_points) + ")");
  }
  if (options_.target_uncertainty_ns > 0 && e.fit.uncertainty_ns > options_.target_uncertainty_ns) {
    return SetInterval(now * 0.8, why,
                       "uncertainty " + std::to_string(std::lround(e.fit.uncertainty_ns)) + " ns (target " +
                           std::to_string(std::lround(options_.target_uncertainty_ns)) + " ns)");
  }
  return SetInterval(now * 1.25, why, "the windows meet the target");
}

}  // namespace chronolink
