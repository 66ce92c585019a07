#include "agent/estimate/edge_drift_history.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace chronolink {

void EdgeDriftHistory::Add(double own_slope) {
  if (options_.windows <= 0 || !std::isfinite(own_slope)) return;
  slopes_.push_back(own_slope);
  while (static_cast<int>(slopes_.size()) > options_.windows) slopes_.pop_front();
}

void EdgeDriftHistory::MapSlopes(const std::function<double(double)>& onto) {
  for (double& s : slopes_) s = onto(s);
}

std::optional<double> EdgeDriftHistory::Slope() const {
  if (options_.windows <= 0 || static_cast<int>(slopes_.size()) < std::max(1, options_.min_windows)) {
    return std::nullopt;
  }
  std::vector<double> s(slopes_.begin(), slopes_.end());
  const size_t mid = s.size() / 2;
  std::nth_element(s.begin(), s.begin() + static_cast<std::ptrdiff_t>(mid), s.end());
  if (s.size() % 2 == 1) return s[mid];
  const double upper = s[mid];
  const double lower = *std::max_element(s.begin(), s.begin() + static_cast<std::ptrdiff_t>(mid));
  return lower + (upper - lower) / 2;
}

std::optional<DriftPrior> EdgeDriftHistory::PriorFor(const std::optional<FitSpanEvidence>& evidence, int64_t span_ns,
                                                     int64_t window_ns) const {
  const std::optional<double> median = Slope();
  if (!median || !evidence || span_ns <= 0 || window_ns <= 0) return std::nullopt;
  // A fit over S seconds of noise sigma per window W: its slope's variance
  // is about 12 sigma^2 / (S^2 (S/W)); the drift's mean over S strays from
  // a longer one's by w^2 / S (a random walk of the offset, white FM).
  const double s = static_cast<double>(span_ns) / 1e9, w = static_cast<double>(window_ns) / 1e9;
  const double drift_change = evidence->wander_ns_per_sqrt_s * evidence->wander_ns_per_sqrt_s * s * s;
  const double own_noise = 12.0 * evidence->window_noise_ns * evidence->window_noise_ns * w;
  if (!std::isfinite(drift_change) || !std::isfinite(own_noise) || drift_change + own_noise <= 0) return std::nullopt;
  return DriftPrior{*median, drift_change / (drift_change + own_noise)};
}

}  // namespace chronolink
