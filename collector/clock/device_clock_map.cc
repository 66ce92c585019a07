// DeviceClockMap: the piecewise-linear GPU -> host REALTIME map and its
// bound. docs/collector-clock.md derives every term; in short, with e the
// knots' bracket half-widths, rho the rate change allowed per sampling
// period and p the periods a gap spans:
//   between knots lo, hi (x from lo, gap D):
//     (1 - x/D) e_lo + (x/D) e_hi + rho p x (D - x) / D
//   beyond an end knot n, baseline b (B = |n - b|), distance d:
//     e_n + (e_n + e_b) d / B + rho (periods(b..n) + ceil(d / period)) d
//   with one knot: e_n + max_rate d.
// Thinning replaces the curvature term of a merged gap by a constant that
// holds what the dropped knots said (their error and their residual against
// the new chord). Integer arithmetic throughout; every rounding is paid for
// by one more ns of bound.
#include "collector/clock/device_clock_map.h"

#include <algorithm>
#include <bit>
#include <limits>

#include "clock/phc_mapping.h"

namespace chronolink::collector {

namespace {

using Wide = __int128;

constexpr Wide kPpbDenominator = 1'000'000'000;
// Products above this saturate; bounds above kErrorCapNs are "no bound".
constexpr Wide kWideCap = static_cast<Wide>(1) << 120;
constexpr int64_t kErrorCapNs = std::numeric_limits<int64_t>::max() / 4;

Wide Abs(Wide v) { return v < 0 ? -v : v; }

// a * b for a, b >= 0, saturating at kWideCap.
Wide SatMul(Wide a, Wide b) {
  if (a == 0 || b == 0) return 0;
  if (a > kWideCap / b) return kWideCap;
  return a * b;
}

// ceil(num / den) for num >= 0, den > 0, capped at kErrorCapNs.
int64_t CeilDiv(Wide num, Wide den) {
  const Wide q = (num + den - 1) / den;
  return q > kErrorCapNs ? kErrorCapNs : static_cast<int64_t>(q);
}

// Sum of non-negative bounds, capped.
int64_t AddBounds(std::initializer_list<int64_t> terms) {
  Wide sum = 0;
  for (int64_t t : terms) sum += t;
  return sum > kErrorCapNs ? kErrorCapNs : static_cast<int64_t>(sum);
}

// round(num / den), halves away from zero, den > 0; *inexact when rounded.
Wide DivRound(Wide num, Wide den, bool* inexact) {
  Wide q = num / den;
  const Wide r = num % den;
  *inexact = r != 0;
  if (Abs(r) * 2 >= den) q += num < 0 ? -1 : 1;
  return q;
}

bool FitsInt64(Wide v) {
  return v >= std::numeric_limits<int64_t>::min() && v <= std::numeric_limits<int64_t>::max();
}

// Host value `base + slope_num / slope_den * dx`, rounded.
bool LineAt(int64_t base, Wide rise, Wide run, Wide dx, int64_t* out, bool* inexact) {
  if (Abs(rise) > kWideCap / (Abs(dx) + 1)) return false;
  const Wide v = static_cast<Wide>(base) + DivRound(rise * dx, run, inexact);
  if (!FitsInt64(v)) return false;
  *out = static_cast<int64_t>(v);
  return true;
}

DeviceClockMapOptions Sanitized(DeviceClockMapOptions o) {
  o.max_bracket_ns = std::max<int64_t>(o.max_bracket_ns, 0);
  o.max_rate_change_ppb = std::max<int64_t>(o.max_rate_change_ppb, 0);
  o.max_rate_ppb = std::max<int64_t>(o.max_rate_ppb, 0);
  o.max_extrapolation_ns = std::max<int64_t>(o.max_extrapolation_ns, 0);
  o.max_knots = std::max<size_t>(o.max_knots, 4);  // thinning needs a gap to merge into
  o.read_granularity_ns = std::max<int64_t>(o.read_granularity_ns, 0);
  return o;
}

}  // namespace

DeviceClockMap::DeviceClockMap(const DeviceClockMapOptions& options)
    : options_(Sanitized(options)) {}

const DeviceClockMapStats& DeviceClockMap::stats() const { return stats_; }
const DeviceClockMapOptions& DeviceClockMap::options() const { return options_; }

std::vector<DeviceClockKnot> DeviceClockMap::Knots() const {
  std::vector<DeviceClockKnot> out;
  out.reserve(knots_.size());
  for (const Knot& k : knots_) out.push_back({k.device_ns, k.host_ns, k.error_ns, k.segment});
  return out;
}

// ---------------------------------------------------------------------------
// Samples

SampleOutcome DeviceClockMap::PickReading(std::span<const SnapshotReading> reads, Knot* out) {
  std::vector<PhcTriplet> usable;
  usable.reserve(reads.size());
  bool any_wide = false;
  for (const SnapshotReading& r : reads) {
    // In 128 bits: garbage host times must not overflow the subtraction.
    const Wide width = static_cast<Wide>(r.host_after_ns) - r.host_before_ns;
    if (r.host_before_ns <= 0 || r.device_ns < 0 || width < 0) continue;
    if (width > options_.max_bracket_ns) {
      any_wide = true;
      continue;
    }
    usable.push_back({r.host_before_ns, r.device_ns, r.host_after_ns});
  }
  // The tightest bracket and its midpoint: phc_mapping's triplet picker,
  // the same rule the agent applies to a PHC.
  PhcOffset best;
  std::string ignored;
  if (usable.empty() || !PhcOffsetFromTriplets(usable, PhcMethod::kExtended, &best, &ignored)) {
    return any_wide || !usable.empty() ? SampleOutcome::kRejectedWide
                                       : SampleOutcome::kRejectedInvalid;
  }
  out->device_ns = best.phc_ns;
  out->host_ns = best.sys_ns;
  // The device latched somewhere in [before, after]; the midpoint is within
  // ceil(width / 2) of it, plus one read granularity.
  out->error_ns = (best.bracket_ns + 1) / 2 + options_.read_granularity_ns;
  stats_.last_bracket_ns = best.bracket_ns;
  return SampleOutcome::kAccepted;
}

SampleOutcome DeviceClockMap::AddSample(std::span<const SnapshotReading> reads) {
  ++stats_.samples;
  ++periods_since_kept_;
  ++period_counter_;
  Knot knot;
  const SampleOutcome picked = PickReading(reads, &knot);
  if (picked == SampleOutcome::kRejectedWide) {
    ++stats_.rejected_wide;
    return picked;
  }
  if (picked == SampleOutcome::kRejectedInvalid) {
    ++stats_.rejected_invalid;
    return picked;
  }
  if (!knots_.empty() && knot.device_ns <= knots_.back().device_ns) {
    ++stats_.rejected_backwards;
    return SampleOutcome::kRejectedBackwards;
  }
  const bool step = !knots_.empty() && IsStep(knot);
  // Within a segment host time must advance with device time, or the
  // inverse (ToDevice) is ambiguous: only possible for samples closer than
  // their own jitter.
  if (!step && !knots_.empty() && knot.host_ns <= knots_.back().host_ns) {
    ++stats_.rejected_backwards;
    return SampleOutcome::kRejectedBackwards;
  }
  Append(knot, step);
  return step ? SampleOutcome::kNewSegment : SampleOutcome::kAccepted;
}

bool DeviceClockMap::IsStep(const Knot& candidate) const {
  const Prediction p = Extrapolate(knots_.size() - 1, candidate.device_ns);
  if (!p.ok) return true;
  const Wide miss = Abs(static_cast<Wide>(candidate.host_ns) - p.host_ns);
  return miss > static_cast<Wide>(p.error_ns) + candidate.error_ns;
}

void DeviceClockMap::Append(Knot knot, bool step) {
  if (knots_.empty()) {
    stats_.segments = 1;
  } else if (step) {
    ++segment_;
    ++stats_.segments;
  }
  knot.segment = segment_;
  knot.period_index = period_counter_;
  knot.periods = std::max<int64_t>(periods_since_kept_, 1);
  if (!step && !knots_.empty()) {
    // A stalled sampler: count the periods it skipped, so the rate limit
    // per period still means the same. Rounded, not ceiled: a gap a little
    // longer than the last period is one period (ceil would make it two,
    // halve the next period estimate and run away).
    const int64_t period = PeriodNs(knots_.size() - 1);
    if (period > 0) {
      const int64_t gap = knot.device_ns - knots_.back().device_ns;
      knot.periods = std::max<int64_t>(knot.periods, (gap + period / 2) / period);
    }
  }
  periods_since_kept_ = 0;
  knots_.push_back(knot);
  ++stats_.accepted;
  if (knots_.size() > options_.max_knots) Thin();
}

// ---------------------------------------------------------------------------
// Segments and periods

size_t DeviceClockMap::SegmentFirst(size_t index) const {
  const uint32_t s = knots_[index].segment;
  auto it = std::lower_bound(knots_.begin(), knots_.begin() + static_cast<ptrdiff_t>(index), s,
                             [](const Knot& k, uint32_t seg) { return k.segment < seg; });
  return static_cast<size_t>(it - knots_.begin());
}

size_t DeviceClockMap::SegmentLast(size_t index) const {
  const uint32_t s = knots_[index].segment;
  auto it = std::upper_bound(knots_.begin() + static_cast<ptrdiff_t>(index), knots_.end(), s,
                             [](uint32_t seg, const Knot& k) { return seg < k.segment; });
  return static_cast<size_t>(it - knots_.begin()) - 1;
}

// The sampling period next to knot `index` (its gap to a neighbour in the
// same segment over the periods that gap spans); 0 for a lone knot.
int64_t DeviceClockMap::PeriodNs(size_t index) const {
  const Knot& k = knots_[index];
  if (index > 0 && knots_[index - 1].segment == k.segment) {
    return std::max<int64_t>((k.device_ns - knots_[index - 1].device_ns) / k.periods, 1);
  }
  if (index + 1 < knots_.size() && knots_[index + 1].segment == k.segment) {
    const Knot& next = knots_[index + 1];
    return std::max<int64_t>((next.device_ns - k.device_ns) / next.periods, 1);
  }
  return 0;
}

// ---------------------------------------------------------------------------
// Conversion

int64_t DeviceClockMap::CurvatureNs(const Knot& hi, int64_t span_ns, int64_t x_ns) const {
  // The rate moves by at most rho per period, so by rho * p over the gap;
  // then the truth lies within rho p x (D - x) / D of the chord through the
  // true end values (docs/collector-clock.md).
  const Wide hump = static_cast<Wide>(x_ns) * (span_ns - x_ns);
  const Wide rate = SatMul(options_.max_rate_change_ppb, hi.periods);
  return CeilDiv(SatMul(hump / span_ns + 1, rate), kPpbDenominator);
}

int64_t DeviceClockMap::InteriorMaxNs(const Knot& lo, const Knot& hi) const {
  if (hi.interior_ns >= 0) return hi.interior_ns;
  const int64_t span = hi.device_ns - lo.device_ns;
  return CurvatureNs(hi, span, span / 2) + 1;  // +1: the floor of span / 2
}

DeviceClockMap::Prediction DeviceClockMap::Interpolate(const Knot& lo, const Knot& hi,
                                                       int64_t device_ns) const {
  Prediction out;
  const int64_t span = hi.device_ns - lo.device_ns;
  const int64_t x = device_ns - lo.device_ns;
  bool inexact = false;
  if (!LineAt(lo.host_ns, static_cast<Wide>(hi.host_ns) - lo.host_ns, span, x, &out.host_ns,
              &inexact)) {
    return out;
  }
  const Wide weighted =
      static_cast<Wide>(lo.error_ns) * (span - x) + static_cast<Wide>(hi.error_ns) * x;
  const int64_t interior = hi.interior_ns >= 0 ? hi.interior_ns : CurvatureNs(hi, span, x);
  out.error_ns = AddBounds({CeilDiv(weighted, span), interior, inexact ? 1 : 0});
  out.ok = out.error_ns < kErrorCapNs;
  return out;
}

DeviceClockMap::Prediction DeviceClockMap::Extrapolate(size_t anchor, int64_t device_ns) const {
  const Knot& n = knots_[anchor];
  const Wide dx = static_cast<Wide>(device_ns) - n.device_ns;
  const Wide dist = Abs(dx);
  Prediction best;
  // Flat: the offset host - device stays within the largest rate.
  const Wide flat = static_cast<Wide>(n.host_ns) + dx;
  if (FitsInt64(flat)) {
    best.host_ns = static_cast<int64_t>(flat);
    best.error_ns =
        AddBounds({n.error_ns, CeilDiv(SatMul(dist, options_.max_rate_ppb), kPpbDenominator)});
    best.ok = best.error_ns < kErrorCapNs;
  }
  // Sloped: the rate over a baseline b..n carries on. Baselines 1, 2, 4, ...
  // knots back (or forward, before the first knot) and the segment's far
  // end: a long one shrinks the knot errors' share, a short one the rate
  // change's; the smallest bound wins (each is a bound on its own).
  const size_t first = SegmentFirst(anchor);
  const size_t last = SegmentLast(anchor);
  const bool forward = dx > 0;
  const size_t reach = forward ? anchor - first : last - anchor;
  if (reach == 0) return best;
  const int64_t period = PeriodNs(anchor);
  const Wide future = (dist + period - 1) / period;
  for (size_t j = 1;; j = std::min(j * 2, reach)) {
    const Knot& b = knots_[forward ? anchor - j : anchor + j];
    const Wide periods = Abs(static_cast<Wide>(n.period_index) - b.period_index) + future;
    const int64_t wander =
        CeilDiv(SatMul(SatMul(options_.max_rate_change_ppb, periods), dist), kPpbDenominator);
    // Longer baselines only add rate change: once it alone loses, stop.
    if (best.ok && AddBounds({n.error_ns, wander}) >= best.error_ns) break;
    const Wide base = Abs(static_cast<Wide>(n.device_ns) - b.device_ns);
    Prediction p;
    bool inexact = false;
    if (LineAt(n.host_ns, static_cast<Wide>(n.host_ns) - b.host_ns,
               static_cast<Wide>(n.device_ns) - b.device_ns, dx, &p.host_ns, &inexact)) {
      p.error_ns = AddBounds(
          {n.error_ns, CeilDiv(SatMul(static_cast<Wide>(n.error_ns) + b.error_ns, dist), base),
           wander, inexact ? 1 : 0});
      p.ok = p.error_ns < kErrorCapNs;
      if (p.ok && (!best.ok || p.error_ns < best.error_ns)) best = p;
    }
    if (j == reach) break;
  }
  return best;
}

ConvertedStamp DeviceClockMap::ToHost(int64_t device_ns) const {
  ConvertedStamp out;
  if (knots_.empty()) return out;
  auto it = std::upper_bound(knots_.begin(), knots_.end(), device_ns,
                             [](int64_t d, const Knot& k) { return d < k.device_ns; });
  const size_t hi = static_cast<size_t>(it - knots_.begin());
  Prediction p;
  if (hi > 0 && knots_[hi - 1].device_ns == device_ns) {
    p = {knots_[hi - 1].host_ns, knots_[hi - 1].error_ns, true};
  } else if (hi == 0 || hi == knots_.size()) {
    const size_t anchor = hi == 0 ? 0 : hi - 1;
    const Wide dist = Abs(static_cast<Wide>(device_ns) - knots_[anchor].device_ns);
    if (dist > options_.max_extrapolation_ns) return out;
    p = Extrapolate(anchor, device_ns);
  } else {
    // A step fell somewhere between two segments: which side of it the
    // instant lies on is unknown.
    if (knots_[hi - 1].segment != knots_[hi].segment) return out;
    p = Interpolate(knots_[hi - 1], knots_[hi], device_ns);
  }
  if (!p.ok) return out;
  out.realtime_ns = p.host_ns;
  out.error_ns = p.error_ns;
  out.ok = true;
  return out;
}

ConvertedStamp DeviceClockMap::ToDeviceInSegment(size_t first, size_t last, int64_t host_ns) const {
  // Start at the knot just below host_ns (host time increases within a
  // segment), then Newton on ToHost: the slope is 1 within max_rate, so
  // each step shrinks the miss by that factor; a few steps reach the ns.
  auto begin = knots_.begin() + static_cast<ptrdiff_t>(first);
  auto end = knots_.begin() + static_cast<ptrdiff_t>(last) + 1;
  auto it =
      std::upper_bound(begin, end, host_ns, [](int64_t h, const Knot& k) { return h < k.host_ns; });
  const Knot& start = it == begin ? *begin : *(it - 1);
  Wide device = static_cast<Wide>(start.device_ns) + (static_cast<Wide>(host_ns) - start.host_ns);
  ConvertedStamp out;
  constexpr int kMaxSteps = 8;
  for (int step = 0; step < kMaxSteps; ++step) {
    if (!FitsInt64(device)) return {};
    const ConvertedStamp at = ToHost(static_cast<int64_t>(device));
    if (!at.ok) return {};
    const Wide miss = static_cast<Wide>(host_ns) - at.realtime_ns;
    out.realtime_ns = static_cast<int64_t>(device);
    out.error_ns =
        AddBounds({at.error_ns, static_cast<int64_t>(std::min<Wide>(Abs(miss), kErrorCapNs))});
    out.ok = out.error_ns < kErrorCapNs;
    if (Abs(miss) <= 1) break;  // the host clock's own rounding
    device += miss;
  }
  return out;
}

ConvertedStamp DeviceClockMap::ToDevice(int64_t host_ns) const {
  if (knots_.empty()) return {};
  // Newest segment first: after REALTIME stepped back, a host instant can
  // lie in two segments' ranges, and the newest is the one that holds now.
  for (size_t last = knots_.size() - 1;;) {
    const size_t first = SegmentFirst(last);
    const bool map_end = last + 1 == knots_.size();
    const bool map_start = first == 0;
    const bool inside = host_ns >= knots_[first].host_ns && host_ns <= knots_[last].host_ns;
    const bool after = map_end && host_ns > knots_[last].host_ns;
    const bool before = map_start && host_ns < knots_[first].host_ns;
    if (inside || after || before) return ToDeviceInSegment(first, last, host_ns);
    if (first == 0) return {};
    last = first - 1;
  }
}

// ---------------------------------------------------------------------------
// Thinning

void DeviceClockMap::Absorb(const Knot& prev, const Knot& mid, Knot* next) {
  const int64_t span = next->device_ns - prev.device_ns;
  const int64_t x = mid.device_ns - prev.device_ns;
  int64_t chord = 0;
  bool inexact = false;
  LineAt(prev.host_ns, static_cast<Wide>(next->host_ns) - prev.host_ns, span, x, &chord, &inexact);
  const Wide residual = Abs(static_cast<Wide>(mid.host_ns) - chord);
  stats_.max_fit_residual_ns = std::max<int64_t>(
      stats_.max_fit_residual_ns, static_cast<int64_t>(std::min<Wide>(residual, kErrorCapNs)));
  // On [prev, mid] the truth was within the old bound of the old chord, and
  // the new chord differs from the old one by at most (residual + rounding)
  // at mid, linearly to 0 at prev; the same on [mid, next]. So the error
  // stays under the chord of prev's and next's errors plus how far mid's
  // error + residual rises above that chord, plus the larger interior term.
  const Wide chord_error =
      (static_cast<Wide>(prev.error_ns) * (span - x) + static_cast<Wide>(next->error_ns) * x) /
      span;
  const Wide above = static_cast<Wide>(mid.error_ns) + residual + 1 - chord_error;
  const int64_t excess = above > 0 ? static_cast<int64_t>(std::min<Wide>(above, kErrorCapNs)) : 0;
  const int64_t interior = std::max(InteriorMaxNs(prev, mid), InteriorMaxNs(mid, *next));
  next->interior_ns = AddBounds({excess, interior});
  next->periods += mid.periods;
}

namespace {

// floor(log2(periods)): gaps of one level span about as many periods.
int Level(int64_t periods) {
  return periods <= 1 ? 0 : std::bit_width(static_cast<uint64_t>(periods)) - 1;
}

}  // namespace

bool DeviceClockMap::ThinPass() {
  // In the oldest half, the knots whose removal makes the shortest merged
  // gaps (in sampling periods, to within a factor of two): the oldest
  // detail goes first, but a region already thinned is not thinned again
  // before the rest has caught up, or the oldest gap would double at every
  // pass and the history's resolution fall off exponentially with age.
  // Never two neighbours in one pass (each merge joins two gaps between
  // kept knots), never a segment's end.
  const size_t half = knots_.size() / 2;
  auto interior = [&](size_t i) {
    return i > 0 && i < half && i + 1 < knots_.size() &&
           knots_[i - 1].segment == knots_[i].segment && knots_[i + 1].segment == knots_[i].segment;
  };
  auto merged = [&](size_t i) { return knots_[i].periods + knots_[i + 1].periods; };
  int64_t shortest = std::numeric_limits<int64_t>::max();
  for (size_t i = 1; i < half; ++i) {
    if (interior(i)) shortest = std::min(shortest, merged(i));
  }
  if (shortest == std::numeric_limits<int64_t>::max()) return false;
  const int level = Level(shortest);
  // Compacts in place: knots_[0, w) are the kept ones so far.
  size_t w = 0;
  bool dropped_previous = false;
  const size_t count = knots_.size();
  for (size_t i = 0; i < count; ++i) {
    if (!dropped_previous && interior(i) && Level(merged(i)) <= level) {
      Absorb(knots_[w - 1], knots_[i], &knots_[i + 1]);
      dropped_previous = true;
      continue;
    }
    dropped_previous = false;
    if (w != i) knots_[w] = knots_[i];
    ++w;
  }
  const size_t dropped = count - w;
  knots_.resize(w);
  stats_.thinned += dropped;
  return dropped > 0;
}

void DeviceClockMap::Thin() {
  // Down to three quarters, so that passes (each O(knots)) come rarely.
  const size_t target = options_.max_knots - options_.max_knots / 4;
  while (knots_.size() > target) {
    if (ThinPass()) continue;
    // Only segment ends are left in the oldest half (a step every sample):
    // forget the oldest knots instead.
    const size_t excess = knots_.size() - target;
    knots_.erase(knots_.begin(), knots_.begin() + static_cast<ptrdiff_t>(excess));
    stats_.thinned += excess;
  }
}

}  // namespace chronolink::collector
