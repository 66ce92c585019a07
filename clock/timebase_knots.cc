#include "clock/timebase_knots.h"

#include <algorithm>
#include <cmath>

namespace chronolink {

TimebaseKnots::TimebaseKnots(int64_t tolerance_ns, double max_rate, int64_t max_segment_ns)
    : tolerance_ns_(tolerance_ns < 0 ? 0 : tolerance_ns), max_rate_(max_rate), max_segment_ns_(max_segment_ns) {}

void TimebaseKnots::StartSegment(const ClockPairSample& s, bool after_step) {
  knots_.push_back({s.raw_ns, s.realtime_ns, after_step});
  open_ = true;
  start_ = last_ = s;
  slope_lo_ = 1.0 - 2 * max_rate_;
  slope_hi_ = 1.0 + 2 * max_rate_;
}

// Whether the open segment can pass within the tolerance of `s` too; the
// slopes that still can, if so.
bool TimebaseKnots::Fits(const ClockPairSample& s, double* lo, double* hi) const {
  const auto d_raw = static_cast<double>(s.raw_ns - start_.raw_ns);
  const auto d_rt = static_cast<double>(s.realtime_ns - start_.realtime_ns);
  const auto slack = static_cast<double>(tolerance_ns_ + s.bracket_ns + start_.bracket_ns);
  *lo = std::max(slope_lo_, (d_rt - slack) / d_raw);
  *hi = std::min(slope_hi_, (d_rt + slack) / d_raw);
  return *lo <= *hi;
}

void TimebaseKnots::Add(const ClockPairSample& s) {
  ++samples_;
  if (!open_) {
    StartSegment(s, false);
    return;
  }
  if (s.raw_ns <= last_.raw_ns) return;
  if (SteppedBetween(last_, s, max_rate_)) {
    if (last_.raw_ns != start_.raw_ns) knots_.push_back({last_.raw_ns, last_.realtime_ns, false});
    StartSegment(s, true);
    return;
  }
  double lo = 0, hi = 0;
  // The kernel said the rate changed between the two samples: the knot goes
  // where the two lines meet, which is where it changed.
  if (const auto kink = RateKink(last_, s)) {
    StartSegment(*kink, false);
    if (Fits(s, &lo, &hi)) {
      slope_lo_ = lo;
      slope_hi_ = hi;
    }
    last_ = s;
    return;
  }
  if (Fits(s, &lo, &hi)) {
    slope_lo_ = lo;
    slope_hi_ = hi;
    last_ = s;
    // Long enough: `s` is a knot (the chord to it passes every sample), and
    // the next segment starts there.
    if (s.raw_ns - start_.raw_ns >= max_segment_ns_) StartSegment(s, false);
    return;
  }
  // The segment ends at its last sample, which starts the next: knots are
  // samples, and the polyline their chords, each within twice the
  // tolerance of the samples it spans.
  StartSegment(last_, false);
  if (Fits(s, &lo, &hi)) {
    slope_lo_ = lo;
    slope_hi_ = hi;
  }
  last_ = s;
}

void TimebaseKnots::EndOpenSegment() {
  if (open_ && last_.raw_ns != start_.raw_ns) StartSegment(last_, false);
}

std::optional<int64_t> TimebaseKnots::RealtimeAt(int64_t raw_ns) const {
  if (knots_.empty() || raw_ns < knots_.front().raw_ns) return std::nullopt;
  const auto after = std::upper_bound(knots_.begin(), knots_.end(), raw_ns,
                                      [](int64_t r, const TimebaseKnot& k) { return r < k.raw_ns; });
  const TimebaseKnot& k = *(after - 1);
  if (after == knots_.end()) {  // the open segment: its chord so far
    if (!open_ || raw_ns > last_.raw_ns) return std::nullopt;
    if (last_.raw_ns == k.raw_ns) return k.realtime_ns;
    return Interpolate(raw_ns, k.raw_ns, k.realtime_ns, last_.raw_ns, last_.realtime_ns);
  }
  if (after->after_step) return raw_ns == k.raw_ns ? std::optional<int64_t>(k.realtime_ns) : std::nullopt;
  return Interpolate(raw_ns, k.raw_ns, k.realtime_ns, after->raw_ns, after->realtime_ns);
}

std::optional<TimebaseExcerpt> TimebaseKnots::Covering(int64_t raw_from, int64_t raw_to, size_t max_knots) const {
  if (knots_.empty() || raw_from < knots_.front().raw_ns || raw_to < raw_from) return std::nullopt;
  auto it = std::upper_bound(knots_.begin(), knots_.end(), raw_from,
                             [](int64_t r, const TimebaseKnot& k) { return r < k.raw_ns; }) - 1;
  TimebaseExcerpt out;
  for (; it != knots_.end(); ++it) {
    if (!out.knots.empty() && it->after_step) return std::nullopt;
    out.knots.push_back({it->raw_ns, it->realtime_ns, false});
    if (it->raw_ns >= raw_to) break;
  }
  if (out.knots.back().raw_ns < raw_to) {  // the open segment holds the end
    if (!open_ || last_.raw_ns < raw_to || last_.raw_ns <= out.knots.back().raw_ns) return std::nullopt;
    out.knots.push_back({last_.raw_ns, last_.realtime_ns, false});
    out.last_provisional = true;
  }
  if (out.knots.size() < 2 || out.knots.size() > max_knots) return std::nullopt;
  return out;
}

size_t TimebaseKnots::DropBefore(int64_t raw_ns) {
  const auto after = std::upper_bound(knots_.begin(), knots_.end(), raw_ns,
                                      [](int64_t r, const TimebaseKnot& k) { return r < k.raw_ns; });
  if (after == knots_.begin()) return 0;
  const auto n = static_cast<size_t>((after - 1) - knots_.begin());
  knots_.erase(knots_.begin(), after - 1);
  return n;
}

}  // namespace chronolink
