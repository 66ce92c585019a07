#include "clock/kernel_clock_mapping.h"

#include <algorithm>
#include <limits>

#include "clock/clock_bracket.h"
#include "clock/clock_reader.h"

namespace chronolink {

namespace {

constexpr int64_t kPpbDenominator = 1'000'000'000;

using Wide = __int128;

int64_t Abs(int64_t v) { return v < 0 ? -v : v; }

// round(a * b / c), c > 0, halves away from zero; *inexact when it rounded.
int64_t MulDivRound(int64_t a, int64_t b, int64_t c, bool* inexact) {
  const Wide num = static_cast<Wide>(a) * b;
  Wide q = num / c;
  const Wide r = num % c;
  if (inexact != nullptr) *inexact = r != 0;
  const Wide twice = (r < 0 ? -r : r) * 2;
  if (twice >= c) q += num < 0 ? -1 : 1;
  return static_cast<int64_t>(q);
}

// ceil(a * b / c) for a, b >= 0, c > 0.
int64_t MulDivCeil(int64_t a, int64_t b, int64_t c) {
  const Wide num = static_cast<Wide>(a) * b;
  return static_cast<int64_t>((num + c - 1) / c);
}

}  // namespace

// ---------------------------------------------------------------------------
// ClockOffsetTrack

void ClockOffsetTrack::Clear() {
  samples_.clear();
  ++segment_;
}

bool ClockOffsetTrack::Extrapolate(int64_t ref_ns, int64_t* offset_ns, int64_t* error_ns) const {
  const ClockOffsetSample& n = samples_.back();
  const int64_t d = ref_ns - n.ref_ns;
  if (d < 0) return false;

  // Flat: the offset stays where it was, within the largest slew.
  int64_t best_offset = n.offset_ns;
  int64_t best_error = n.error_ns + MulDivCeil(d, options_.max_slew_ppb, kPpbDenominator);

  // Sloped: the rate over the segment's longest baseline b..n continues,
  // within max_rate_change. With B = n - b:
  //   |error| <= e_n (1 + d/B) + e_b d/B + max_rate_change * d.
  for (const ClockOffsetSample& b : samples_) {
    if (b.segment != n.segment) continue;
    const int64_t base = n.ref_ns - b.ref_ns;
    if (base <= 0) break;
    bool inexact = false;
    const int64_t offset =
        n.offset_ns + MulDivRound(n.offset_ns - b.offset_ns, d, base, &inexact);
    const int64_t error = n.error_ns + MulDivCeil(n.error_ns + b.error_ns, d, base) +
                          MulDivCeil(d, options_.max_rate_change_ppb, kPpbDenominator) +
                          (inexact ? 1 : 0);
    if (error < best_error) {
      best_offset = offset;
      best_error = error;
    }
    break;  // the first sample of the segment still held is the longest baseline
  }
  *offset_ns = best_offset;
  *error_ns = best_error;
  return true;
}

bool ClockOffsetTrack::Add(ClockOffsetSample sample) {
  if (sample.error_ns < 0) return false;
  bool step = false;
  if (!samples_.empty()) {
    const ClockOffsetSample& n = samples_.back();
    if (sample.ref_ns <= n.ref_ns) {
      // Not newer on the reference axis: a duplicate, or the reference clock
      // went backwards (TAI is stepped together with REALTIME).
      if (sample.ref_ns == n.ref_ns &&
          Abs(sample.offset_ns - n.offset_ns) <= sample.error_ns + n.error_ns) {
        return false;
      }
      step = true;
    } else {
      int64_t predicted = 0;
      int64_t bound = 0;
      Extrapolate(sample.ref_ns, &predicted, &bound);
      step = Abs(sample.offset_ns - predicted) > bound + sample.error_ns;
    }
  }
  if (step) {
    ++segment_;
    ++steps_;
  }
  sample.segment = segment_;
  samples_.push_back(sample);
  while (samples_.size() > std::max<size_t>(options_.history, 2)) samples_.pop_front();
  return step;
}

ConvertedStamp ClockOffsetTrack::Convert(int64_t ref_ns) const {
  ConvertedStamp out;
  if (samples_.empty()) return out;
  const ClockOffsetSample& newest = samples_.back();
  if (ref_ns >= newest.ref_ns) {
    if (ref_ns - newest.ref_ns > options_.max_extrapolation_ns) return out;
    int64_t offset = 0;
    Extrapolate(ref_ns, &offset, &out.error_ns);
    out.realtime_ns = ref_ns + offset;
    out.ok = true;
    return out;
  }
  // Newest pair first: after a backward step of the reference axis (TAI),
  // a value can occur in two segments; the newest wins.
  for (size_t i = samples_.size() - 1; i > 0; --i) {
    const ClockOffsetSample& hi = samples_[i];
    const ClockOffsetSample& lo = samples_[i - 1];
    if (lo.segment != hi.segment) {
      // A step fell somewhere between lo and hi: which side of it the stamp
      // is on is unknown.
      if (lo.ref_ns < ref_ns && ref_ns < hi.ref_ns) return out;
      continue;
    }
    if (ref_ns < lo.ref_ns || ref_ns > hi.ref_ns) continue;
    // Linear interpolation, lambda = x / D:
    //   |error| <= (1 - lambda) e_lo + lambda e_hi + max_rate_change * x (D - x) / D
    const int64_t span = hi.ref_ns - lo.ref_ns;
    const int64_t x = ref_ns - lo.ref_ns;
    bool inexact = false;
    const int64_t offset = lo.offset_ns + MulDivRound(hi.offset_ns - lo.offset_ns, x, span, &inexact);
    const Wide weighted = static_cast<Wide>(lo.error_ns) * (span - x) +
                          static_cast<Wide>(hi.error_ns) * x;
    int64_t error = static_cast<int64_t>((weighted + span - 1) / span);
    const Wide curve = static_cast<Wide>(x) * (span - x) / span;  // <= span / 4
    error += MulDivCeil(static_cast<int64_t>(curve) + 1, options_.max_rate_change_ppb,
                        kPpbDenominator);
    if (inexact) error += 1;
    out.realtime_ns = ref_ns + offset;
    out.error_ns = error;
    out.ok = true;
    return out;
  }
  return out;  // older than the history
}

// ---------------------------------------------------------------------------
// KernelClockMapping

KernelClockMapping::KernelClockMapping() : KernelClockMapping(KernelClockMappingOptions{}) {}

KernelClockMapping::KernelClockMapping(const KernelClockMappingOptions& options, ClockReadFn read)
    : options_(options),
      read_(read ? std::move(read) : ClockReadFn(ReadClockNs)),
      mono_(options.track),
      tai_(options.track) {
  if (options_.read_granularity_ns >= 0) {
    granularity_ns_ = options_.read_granularity_ns;
  } else {
    int64_t g = 1;
    for (clockid_t id : {CLOCK_MONOTONIC, CLOCK_REALTIME, CLOCK_TAI}) {
      timespec res{};
      if (clock_getres(id, &res) == 0) g = std::max(g, TimespecToNs(res));
    }
    granularity_ns_ = g;
  }
  if (options_.reads_per_sample < 1) options_.reads_per_sample = 1;
}

bool KernelClockMapping::Bracket(clockid_t ref, ClockOffsetSample* out) {
  const TightestBracket tightest = TightestOfReads(options_.reads_per_sample, read_, ref, CLOCK_REALTIME);
  if (!tightest.found()) return false;
  const BracketOffset o = tightest.OffsetAtMidpoint(granularity_ns_);
  out->ref_ns = o.ref_ns;
  out->offset_ns = o.offset_ns;
  out->error_ns = o.error_ns;
  out->bracket_ns = o.bracket_ns;
  return true;
}

void KernelClockMapping::Sample(int64_t now_mono_ns) {
  if (sampled_ && options_.min_interval_ns > 0 &&
      now_mono_ns - last_sample_call_ns_ < options_.min_interval_ns) {
    return;
  }
  sampled_ = true;
  last_sample_call_ns_ = now_mono_ns;
  ++samples_taken_;

  ClockOffsetSample s;
  if (Bracket(CLOCK_MONOTONIC, &s)) {
    last_bracket_ns_ = s.bracket_ns;
    if (s.bracket_ns <= options_.max_bracket_ns) {
      mono_.Add(s);
    } else {
      ++samples_rejected_;
    }
  } else {
    ++samples_rejected_;
  }

  if (Bracket(CLOCK_TAI, &s)) {
    last_tai_bracket_ns_ = s.bracket_ns;
    if (s.bracket_ns <= options_.max_bracket_ns) {
      tai_.Add(s);
    } else {
      ++samples_rejected_;
    }
  } else {
    ++samples_rejected_;
  }
}

}  // namespace chronolink
