#include "clock/realtime_raw_map.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

namespace chronolink {

int64_t Interpolate(int64_t x, int64_t x0, int64_t y0, int64_t x1, int64_t y1) {
  const __int128 num = static_cast<__int128>(x - x0) * (y1 - y0);
  const __int128 den = x1 - x0;
  __int128 q = num / den;
  const __int128 r = num % den;
  if (2 * (r < 0 ? -r : r) >= (den < 0 ? -den : den)) q += ((r < 0) != (den < 0)) ? -1 : 1;
  return y0 + static_cast<int64_t>(q);
}

std::optional<ClockPairSample> RateKink(const ClockPairSample& a, const ClockPairSample& b) {
  if (a.rate_fine == kRateUnknown || b.rate_fine == kRateUnknown || a.rate_fine == b.rate_fine) return std::nullopt;
  // a.rt + u·(1 + ra) = b.rt - (d_raw - u)·(1 + rb), u from a.
  const long double ra = static_cast<long double>(a.rate_fine) * 1e-15L;
  const long double rb = static_cast<long double>(b.rate_fine) * 1e-15L;
  const auto d_raw = static_cast<long double>(b.raw_ns - a.raw_ns);
  const auto d_rt = static_cast<long double>(b.realtime_ns - a.realtime_ns);
  const long double u = (d_rt - d_raw - rb * d_raw) / (ra - rb);
  if (!(u > 0 && u < d_raw)) return std::nullopt;
  ClockPairSample k;
  k.raw_ns = a.raw_ns + static_cast<int64_t>(std::llround(u));
  k.realtime_ns = a.realtime_ns + static_cast<int64_t>(std::llround(u * (1 + ra)));
  k.rate_fine = b.rate_fine;
  return k;
}

bool SteppedBetween(const ClockPairSample& a, const ClockPairSample& b, double max_rate) {
  const auto d_raw = static_cast<long double>(b.raw_ns - a.raw_ns);
  const auto excess = static_cast<long double>((b.realtime_ns - a.realtime_ns) - (b.raw_ns - a.raw_ns));
  const long double slack = static_cast<long double>(a.bracket_ns + b.bracket_ns) + 2;
  if (a.rate_fine != kRateUnknown && b.rate_fine != kRateUnknown) {
    // Between the two rates, wherever the change fell.
    const long double ra = static_cast<long double>(a.rate_fine) * 1e-15L * d_raw;
    const long double rb = static_cast<long double>(b.rate_fine) * 1e-15L * d_raw;
    return excess < std::min(ra, rb) - slack || excess > std::max(ra, rb) + slack;
  }
  return std::fabs(static_cast<double>(excess)) > max_rate * static_cast<double>(d_raw) + static_cast<double>(slack);
}

namespace {

// y at x on the line from a to b, through their kink where they have one.
int64_t RawBetween(int64_t realtime_ns, const ClockPairSample& a, const ClockPairSample& b) {
  if (const auto k = RateKink(a, b); k && k->realtime_ns > a.realtime_ns && k->realtime_ns < b.realtime_ns) {
    if (realtime_ns <= k->realtime_ns) return Interpolate(realtime_ns, a.realtime_ns, a.raw_ns, k->realtime_ns, k->raw_ns);
    return Interpolate(realtime_ns, k->realtime_ns, k->raw_ns, b.realtime_ns, b.raw_ns);
  }
  return Interpolate(realtime_ns, a.realtime_ns, a.raw_ns, b.realtime_ns, b.raw_ns);
}

int64_t RealtimeBetween(int64_t raw_ns, const ClockPairSample& a, const ClockPairSample& b) {
  if (const auto k = RateKink(a, b); k && k->raw_ns > a.raw_ns && k->raw_ns < b.raw_ns) {
    if (raw_ns <= k->raw_ns) return Interpolate(raw_ns, a.raw_ns, a.realtime_ns, k->raw_ns, k->realtime_ns);
    return Interpolate(raw_ns, k->raw_ns, k->realtime_ns, b.raw_ns, b.realtime_ns);
  }
  return Interpolate(raw_ns, a.raw_ns, a.realtime_ns, b.raw_ns, b.realtime_ns);
}

}  // namespace

RealtimeRawMap::RealtimeRawMap(size_t capacity, double max_rate)
    : capacity_(capacity < 2 ? 2 : capacity), max_rate_(max_rate) {}

void RealtimeRawMap::Add(const ClockPairSample& s) {
  bool step = false;
  if (!samples_.empty()) {
    const ClockPairSample& last = samples_.back();
    if (s.raw_ns <= last.raw_ns) return;
    step = SteppedBetween(last, s, max_rate_);
    if (step) ++breaks_;
  }
  samples_.push_back(s);
  break_before_.push_back(step);
  while (samples_.size() > capacity_) {
    samples_.pop_front();
    break_before_.pop_front();
  }
}

std::optional<int64_t> RealtimeRawMap::RawOf(int64_t realtime_ns, int64_t* bound_ns) const {
  // From the newest: most questions are about the last few milliseconds.
  for (size_t i = samples_.size(); i-- > 0;) {
    const ClockPairSample& b = samples_[i];
    if (b.realtime_ns == realtime_ns) {
      if (bound_ns) *bound_ns = b.bracket_ns;
      return b.raw_ns;
    }
    if (i == 0) break;
    const ClockPairSample& a = samples_[i - 1];
    if (break_before_[i]) {
      // Past a step: REALTIME the step skipped (forward) or made the clock
      // read twice (back) has no one answer. After a step back the clock read
      // from b's reading less the whole interval on: only below that, and
      // below a's, is one answer left (with the rate's margin).
      const int64_t d_raw = b.raw_ns - a.raw_ns;
      const auto margin = static_cast<int64_t>(max_rate_ * static_cast<double>(d_raw)) + a.bracket_ns + b.bracket_ns;
      if (realtime_ns >= std::min(a.realtime_ns, b.realtime_ns - d_raw) - margin) return std::nullopt;
      continue;
    }
    if (a.realtime_ns < realtime_ns && realtime_ns < b.realtime_ns) {
      if (bound_ns) *bound_ns = std::max(a.bracket_ns, b.bracket_ns);
      return RawBetween(realtime_ns, a, b);
    }
  }
  return std::nullopt;
}

std::optional<int64_t> RealtimeRawMap::RealtimeOf(int64_t raw_ns) const {
  // RAW increases from sample to sample (Add): one search, not a scan of
  // all 8 192 for every instant past the newest (each Now() and deadline:
  // a tenth of the agent's CPU under load).
  const auto after = std::upper_bound(samples_.begin(), samples_.end(), raw_ns,
                                      [](int64_t raw, const ClockPairSample& s) { return raw < s.raw_ns; });
  if (after == samples_.begin()) return std::nullopt;
  const size_t i = static_cast<size_t>(after - samples_.begin()) - 1;  // the last at or before raw_ns
  if (samples_[i].raw_ns == raw_ns) return samples_[i].realtime_ns;
  if (i + 1 == samples_.size() || break_before_[i + 1]) return std::nullopt;
  return RealtimeBetween(raw_ns, samples_[i], samples_[i + 1]);
}

}  // namespace chronolink
