#include "agent/estimate/fit_span_chooser.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace chronolink {
namespace {

constexpr int kLags[] = {1, 2, 4, 8};
constexpr int kMinSamplesPerLag = 8;
constexpr int kMaxGapWindows = 4;
// A Gaussian's median absolute value is 0.6745 sigma.
constexpr double kMedianAbsToSigma = 1 / 0.6745;
// chronolink-sim: a span's wander error has p99 = w sqrt(S), sigma = w sqrt(S) / 2.576.
constexpr double kWanderVariancePerSecond = 1 / (2.576 * 2.576);

// The mean square, with values past 4 sigma (sigma from the median absolute
// value) clipped to it: nearly a mean square's efficiency on Gaussian noise
// (a median's would need twice the windows), while one bad window's fit
// cannot carry it. The clip costs a Gaussian under 0.1 %.
double ClippedVariance(std::vector<double>* v) {
  auto mid = v->begin() + static_cast<std::ptrdiff_t>(v->size() / 2);
  std::nth_element(v->begin(), mid, v->end());
  const double clip = 4 * *mid * kMedianAbsToSigma;
  double sum = 0;
  for (double x : *v) sum += std::min(x, clip) * std::min(x, clip);
  return sum / static_cast<double>(v->size());
}

}  // namespace

FitSpanChooser::FitSpanChooser(int64_t window_ns, FitSpanChooserOptions options)
    : window_ns_(window_ns), options_(options) {
  options_.min_span_ns = std::max(options_.min_span_ns, window_ns_);
  options_.max_span_ns = std::max(options_.max_span_ns, options_.min_span_ns);
  span_ns_ = options_.start_span_ns > 0 ? std::clamp(options_.start_span_ns, options_.min_span_ns, options_.max_span_ns)
                                        : StartSpan(window_ns_, options_.min_span_ns, options_.max_span_ns);
}

int64_t FitSpanChooser::StartSpan(int64_t window_ns, int64_t min_span_ns, int64_t max_span_ns) {
  if (max_span_ns <= min_span_ns) return min_span_ns;
  return min_span_ns + (max_span_ns - min_span_ns) / window_ns * window_ns;  // whole windows
}

double FitSpanChooser::SpanVariance(const FitSpanEvidence& e, int64_t window_ns, int64_t span_ns) {
  const double w_s = static_cast<double>(window_ns) / 1e9, s_s = static_cast<double>(span_ns) / 1e9;
  const double noise2 = e.window_noise_ns * e.window_noise_ns * w_s / s_s;
  return noise2 + kWanderVariancePerSecond * e.wander_lower_ns_per_sqrt_s * e.wander_lower_ns_per_sqrt_s * s_s;
}

std::optional<FitSpanEvidence> FitSpanChooser::Estimate() const {
  // The fits by window index from the oldest: failed fits leave holes.
  const int64_t first = fits_.front().x0_ns;
  std::vector<std::optional<double>> slots(static_cast<size_t>((fits_.back().x0_ns - first) / window_ns_ + 1));
  for (const Fit& f : fits_) slots[static_cast<size_t>((f.x0_ns - first) / window_ns_)] = f.beta_ns;
  // Least squares v(m) = a + b m over the lags with enough samples,
  // weighted by each variance's own precision (samples / v^2): where the
  // wander dominates, the long lags' variances are large and loose, and
  // unweighted they would swamp the intercept that is the noise.
  struct Lag {
    double m, v, samples, weight;
  };
  std::vector<Lag> used;
  double sw = 0, sm = 0, sv = 0, smm = 0, smv = 0;
  std::vector<double> d2;
  for (int m : kLags) {
    d2.clear();
    for (size_t k = static_cast<size_t>(m); k + static_cast<size_t>(m) < slots.size(); ++k) {
      const auto &lo = slots[k - m], &mid = slots[k], &hi = slots[k + m];
      if (lo && mid && hi) d2.push_back(std::abs(*hi - 2 * *mid + *lo));
    }
    if (static_cast<int>(d2.size()) < kMinSamplesPerLag) continue;
    const double v = ClippedVariance(&d2);
    const double n = static_cast<double>(d2.size());
    const double w = n / std::max(v * v, 1e-12);
    sw += w, sm += w * m, sv += w * v, smm += w * m * m, smv += w * m * v;
    used.push_back({static_cast<double>(m), v, n, w});
  }
  if (used.size() < 2) return std::nullopt;
  const double det = sw * smm - sm * sm;
  const double slope = (sw * smv - sm * sv) / det;
  const double b = std::max(0.0, slope);
  const double a = std::max(0.0, (sv - b * sm) / sw);
  // The slope is sum c_i v_i; a mean square of n Gaussian values varies by
  // 2 v^2 / n, and the second differences at lag m overlap their neighbours'
  // terms, so n counts as n / m.
  double slope_variance = 0;
  for (const Lag& l : used) {
    const double c = l.weight * (sw * l.m - sm) / det;
    slope_variance += c * c * 2 * l.v * l.v * l.m / l.samples;
  }
  const double b_lower = std::max(0.0, slope - options_.wander_doubt_sigmas * std::sqrt(slope_variance));
  FitSpanEvidence e;
  const double two_w_s = 2 * static_cast<double>(window_ns_) / 1e9;
  e.window_noise_ns = std::sqrt(a / 6);
  e.wander_ns_per_sqrt_s = std::sqrt(b / two_w_s);
  e.wander_lower_ns_per_sqrt_s = std::sqrt(b_lower / two_w_s);
  e.windows = static_cast<int>(fits_.size());
  e.best_span_ns = options_.min_span_ns;
  for (int64_t s = options_.min_span_ns; s <= options_.max_span_ns; s += window_ns_) {
    if (SpanVariance(e, window_ns_, s) < SpanVariance(e, window_ns_, e.best_span_ns)) e.best_span_ns = s;
  }
  return e;
}

void FitSpanChooser::MapOffsets(const std::function<double(int64_t, double)>& onto) {
  for (Fit& f : fits_) f.beta_ns = onto(f.x0_ns, f.beta_ns);
}

void FitSpanChooser::AfterClockStep() {
  fits_.clear();
  wanting_ = 0;
}

bool FitSpanChooser::Add(int64_t x0_ns, const LineFit& fit) {
  if (!fit.ok || !std::isfinite(fit.beta_ns)) return false;
  if (!fits_.empty()) {
    const int64_t gap = x0_ns - fits_.back().x0_ns;
    if (gap <= 0 || gap > kMaxGapWindows * window_ns_ || gap % window_ns_ != 0) fits_.clear();
  }
  fits_.push_back({x0_ns, fit.beta_ns});
  if (static_cast<int>(fits_.size()) > options_.history) fits_.pop_front();
  if (static_cast<int>(fits_.size()) < options_.min_history) return false;
  evidence_ = Estimate();
  // Only for a real gain: on a tie (no noise, no wander) the span stays.
  if (!evidence_ || !(SpanVariance(*evidence_, window_ns_, span_ns_) >
                      options_.switch_gain * SpanVariance(*evidence_, window_ns_, evidence_->best_span_ns))) {
    wanting_ = 0;
    return false;
  }
  const int way = evidence_->best_span_ns > span_ns_ ? 1 : -1;
  wanting_ = wanting_ * way > 0 ? wanting_ + way : way;
  if (wanting_ * way < options_.confirm_windows) return false;
  span_ns_ = evidence_->best_span_ns;
  wanting_ = 0;
  return true;
}

}  // namespace chronolink
