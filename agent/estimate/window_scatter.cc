#include "agent/estimate/window_scatter.h"

#include <cmath>

namespace chronolink {

void WindowScatter::Reset() {
  have_last_ = false;
  misses_.clear();
}

std::optional<double> WindowScatter::Add(int64_t x0_ns, const LineFit& fit) {
  if (!fit.ok || !std::isfinite(fit.beta_ns) || !std::isfinite(fit.alpha)) return std::nullopt;
  if (have_last_) {
    const int64_t gap = x0_ns - last_x0_ns_;  // one node clock: a small difference
    if (gap <= 0 || gap > options_.max_gap_windows * window_ns_) {
      misses_.clear();
    } else {
      const double predicted = last_beta_ns_ + last_alpha_ * static_cast<double>(gap);
      misses_.push_back(fit.beta_ns - predicted);
      if (static_cast<int>(misses_.size()) > options_.history) misses_.pop_front();
    }
  }
  have_last_ = true;
  last_x0_ns_ = x0_ns;
  last_beta_ns_ = fit.beta_ns;
  last_alpha_ = fit.alpha;
  if (static_cast<int>(misses_.size()) < options_.min_history) return std::nullopt;
  double sum_sq = 0;
  for (double m : misses_) sum_sq += m * m;
  const double noise_sq = sum_sq / static_cast<double>(misses_.size()) / 2.0;
  return std::sqrt(noise_sq + options_.floor_ns * options_.floor_ns);
}

}  // namespace chronolink
