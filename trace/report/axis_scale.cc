#include "trace/report/axis_scale.h"

#include <algorithm>
#include <cmath>

namespace chronolink::trace::report {

double NiceStep(double raw) {
  if (!(raw > 0) || !std::isfinite(raw)) return 1;
  const double power = std::pow(10.0, std::floor(std::log10(raw)));
  for (double factor : {1.0, 2.0, 5.0, 10.0}) {
    if (factor * power >= raw * (1 - 1e-9)) return factor * power;
  }
  return 10 * power;
}

LinearScale::LinearScale(double lo, double hi, double pixel_lo, double pixel_hi, int target_ticks,
                         Domain domain)
    : pixel_lo_(pixel_lo), pixel_hi_(pixel_hi) {
  if (!std::isfinite(lo) || !std::isfinite(hi)) lo = hi = 0;
  if (lo > hi) std::swap(lo, hi);
  if (hi - lo <= std::max(std::fabs(lo), std::fabs(hi)) * 1e-12) {
    // A flat series: a range small against its value, but not zero.
    const double pad = std::max(std::fabs(lo) * 1e-3, 1e-3);
    lo -= pad;
    hi += pad;
  }
  const double step = NiceStep((hi - lo) / std::max(1, target_ticks - 1));
  const double first_tick = std::ceil(lo / step - 1e-9) * step;
  const double last_tick = std::floor(hi / step + 1e-9) * step;
  lo_ = domain == Domain::kNice ? std::floor(lo / step + 1e-9) * step : lo;
  hi_ = domain == Domain::kNice ? std::ceil(hi / step - 1e-9) * step : hi;
  const double from = domain == Domain::kNice ? lo_ : first_tick;
  const double to = domain == Domain::kNice ? hi_ : last_tick;
  // Multiples of the step counted, not summed, so 0.1-steps do not drift.
  const double first_index = std::round(from / step);
  for (double k = first_index; k * step <= to + step * 1e-6; ++k) {
    const double tick = k * step;
    ticks_.push_back(std::fabs(tick) < step * 1e-9 ? 0.0 : tick);
  }
  decimals_ = std::clamp(static_cast<int>(-std::floor(std::log10(step) + 1e-9)), 0, 9);
}

LinearScale LinearScale::OnPixels(double pixel_lo, double pixel_hi) const {
  LinearScale copy = *this;
  copy.pixel_lo_ = pixel_lo;
  copy.pixel_hi_ = pixel_hi;
  return copy;
}

double LinearScale::operator()(double value) const {
  return pixel_lo_ + (value - lo_) / (hi_ - lo_) * (pixel_hi_ - pixel_lo_);
}

LogScale::LogScale(double min_positive, double max, double floor, double pixel_lo, double pixel_hi)
    : pixel_lo_(pixel_lo), pixel_hi_(pixel_hi) {
  const double lo = std::max(std::isfinite(min_positive) && min_positive > 0 ? min_positive : floor, floor);
  const double hi = std::max(std::isfinite(max) ? max : lo, lo);
  log_lo_ = std::floor(std::log10(lo) + 1e-9);
  log_hi_ = std::max(std::ceil(std::log10(hi) - 1e-9), log_lo_ + 1);
  for (double d = log_lo_; d <= log_hi_; ++d) decades_.push_back(std::pow(10.0, d));
}

double LogScale::operator()(double value) const {
  const double position = value > 0 ? std::clamp(std::log10(value), log_lo_, log_hi_) : log_lo_;
  return pixel_lo_ + (position - log_lo_) / (log_hi_ - log_lo_) * (pixel_hi_ - pixel_lo_);
}

}  // namespace chronolink::trace::report
