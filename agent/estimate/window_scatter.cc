#include "agent/estimate/window_scatter.h"

#include <algorithm>
#include <cmath>
#include <vector>

// Eigen is header-only (as in agent/solve/global_solver.cc).
#include <eigen3/Eigen/Dense>

namespace chronolink {

// Least squares beta = a + b x + c x² (trend_degree 2; 1 drops c), x in
// seconds from the newest window (the differences are small; epoch ns never
// become doubles), centred so the columns are well conditioned; the
// windows' residuals from it, oldest first.
std::vector<double> WindowScatter::TrendResiduals(int64_t newest_x0_ns, double newest_beta_ns) const {
  const auto n = static_cast<Eigen::Index>(windows_.size());
  Eigen::VectorXd x(n), y(n);
  for (Eigen::Index i = 0; i < n; ++i) {
    x(i) = static_cast<double>(windows_[i].x0_ns - newest_x0_ns) / 1e9;
    y(i) = windows_[i].beta_ns - newest_beta_ns;
  }
  x.array() -= x.mean();
  const int columns = options_.trend_degree + 1;
  Eigen::MatrixXd design(n, columns);
  for (int c = 0; c < columns; ++c) design.col(c) = x.array().pow(c).matrix();
  const Eigen::VectorXd coef = design.colPivHouseholderQr().solve(y);
  const Eigen::VectorXd r = y - design * coef;
  return {r.data(), r.data() + n};
}

std::optional<WindowSigma> WindowScatter::Add(int64_t x0_ns, const LineFit& fit, int64_t fit_span_ns, WindowLine line) {
  if (!fit.ok || !std::isfinite(fit.beta_ns)) return std::nullopt;
  const bool stalled = stall_guard_.Stalled(fit.uncertainty_ns);
  std::optional<WindowSigma> sigma = SigmaWith(x0_ns, fit, fit_span_ns, line);
  if (stalled) windows_.pop_back();  // its own sigma saw it; the next windows' trends do not
  if (sigma) KeepMemory(stalled, &*sigma);
  return sigma;
}

void WindowScatter::KeepMemory(bool stalled, WindowSigma* sigma) {
  const double own = sigma->sigma_ns;
  const size_t n = recent_sigmas_.size();
  if (options_.sigma_memory > 0 && n >= static_cast<size_t>(std::max(1, options_.sigma_memory_min))) {
    std::vector<double> sorted(recent_sigmas_.begin(), recent_sigmas_.end());
    std::sort(sorted.begin(), sorted.end());
    const double median = n % 2 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
    sigma->sigma_ns = std::max(own, options_.sigma_memory * median);
  }
  if (stalled) return;
  recent_sigmas_.push_back(own);
  while (recent_sigmas_.size() > static_cast<size_t>(std::max(1, options_.sigma_memory_windows))) {
    recent_sigmas_.pop_front();
  }
}

std::optional<WindowSigma> WindowScatter::SigmaWith(int64_t x0_ns, const LineFit& fit, int64_t fit_span_ns,
                                                    WindowLine line) {
  if (last_x0_ns_) {
    // From the last window fed, stalled or not: a stalled path is still the
    // same stretch of it, however many of its windows in a row.
    const int64_t gap = x0_ns - *last_x0_ns_;  // one node clock: a small difference
    if (gap <= 0 || gap > options_.max_gap_windows * window_ns_) {
      windows_.clear();
      recent_sigmas_.clear();
    }
  }
  last_x0_ns_ = x0_ns;
  windows_.push_back({x0_ns, fit.beta_ns});
  const double spans = std::max(1.0, static_cast<double>(fit_span_ns) / static_cast<double>(2 * window_ns_));
  const auto history =
      static_cast<size_t>(std::lround(options_.history * std::pow(spans, options_.history_span_power)));
  while (windows_.size() > history) windows_.pop_front();
  const int n = static_cast<int>(windows_.size());
  if (n < options_.min_history) return std::nullopt;
  std::vector<double> residuals = TrendResiduals(x0_ns, fit.beta_ns);
  for (double& r : residuals) r = std::abs(r);
  // The median absolute residual, as a Gaussian's sigma (x 1.4826).
  std::sort(residuals.begin(), residuals.end());
  const double mad = n % 2 ? residuals[n / 2] : (residuals[n / 2 - 1] + residuals[n / 2]) / 2;
  const double scatter = options_.tail_factor * 1.4826 * mad;
  const double averaged = line == WindowLine::kMeanWithLaterHalf ? options_.later_half_factor : 1.0;
  const double excess = averaged * options_.band_excess_weight * std::max(0.0, fit.uncertainty_ns - fit.margin_ns);
  const double shift = averaged * options_.floor_shift_weight * std::abs(fit.floor_shift_ns);
  const double noise = std::hypot(scatter, std::isfinite(excess) ? excess : 0.0, std::isfinite(shift) ? shift : 0.0);
  const double asymmetry = options_.path_asymmetry_ns / (2 * std::sqrt(3.0));
  const double shared2 = options_.floor_ns * options_.floor_ns + asymmetry * asymmetry;
  return WindowSigma{std::sqrt(noise * noise + shared2), std::sqrt(shared2), scatter};
}

void WindowScatter::MapOffsets(const std::function<double(int64_t, double)>& onto) {
  for (Window& w : windows_) w.beta_ns = onto(w.x0_ns, w.beta_ns);
}

}  // namespace chronolink
