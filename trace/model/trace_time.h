// Instants of model events without int64 picosecond overflow: an epoch
// instant in ns plus a sub-nanosecond remainder in ps. All arithmetic is
// integer; overflow is reported, never wrapped.
#pragma once

#include <cstdint>
#include <optional>

#include "proto/xplane.pb.h"
#include "trace/model/host_trace.h"

namespace chronolink::trace {

struct TraceInstant {
  int64_t ns = 0;  // epoch ns on the trace's clock
  int32_t ps = 0;  // 0..999, added to ns

  friend auto operator<=>(const TraceInstant&, const TraceInstant&) = default;
};

// base_ns + timestamp_ns + offset_ps, normalised; nullopt on overflow.
std::optional<TraceInstant> EventStart(int64_t line_base_ns, const xspace::XLine& line,
                                       const xspace::XEvent& event);
// Start + duration_ps; nullopt on overflow.
std::optional<TraceInstant> EventEnd(int64_t line_base_ns, const xspace::XLine& line,
                                     const xspace::XEvent& event);
// `to` - `from` in ps; nullopt when it does not fit int64 (±106 days).
inline std::optional<int64_t> DiffPs(const TraceInstant& to, const TraceInstant& from) {
  int64_t dns;
  if (__builtin_sub_overflow(to.ns, from.ns, &dns)) return std::nullopt;
  int64_t ps;
  if (__builtin_mul_overflow(dns, int64_t{1000}, &ps)) return std::nullopt;
  if (__builtin_add_overflow(ps, int64_t{to.ps} - from.ps, &ps)) return std::nullopt;
  return ps;
}

// Adds ps to an instant; nullopt on overflow.
inline std::optional<TraceInstant> AddPs(const TraceInstant& t, int64_t ps) {
  // Split ps into whole ns and a remainder in [0, 1000).
  int64_t add_ns = ps / 1000;
  int64_t rem = ps % 1000;
  if (rem < 0) {
    rem += 1000;
    add_ns -= 1;
  }
  int64_t total_ps = t.ps + rem;
  if (total_ps >= 1000) {
    total_ps -= 1000;
    if (__builtin_add_overflow(add_ns, 1, &add_ns)) return std::nullopt;
  }
  TraceInstant out;
  if (__builtin_add_overflow(t.ns, add_ns, &out.ns)) return std::nullopt;
  out.ps = static_cast<int32_t>(total_ps);
  return out;
}

// Subtracts ps from an instant; nullopt on overflow (any int64 ps).
inline std::optional<TraceInstant> SubPs(const TraceInstant& x, int64_t ps) {
  int64_t ns = ps / 1000;
  int64_t rem = ps % 1000;
  if (rem < 0) {
    rem += 1000;
    --ns;
  }
  int64_t out_ps = x.ps - rem;
  if (out_ps < 0) {
    out_ps += 1000;
    ++ns;
  }
  TraceInstant out;
  if (__builtin_sub_overflow(x.ns, ns, &out.ns)) return std::nullopt;
  out.ps = static_cast<int32_t>(out_ps);
  return out;
}

// One linear piece of a clock map: an instant x maps to x − o(x), with the
// offset o(x) = offset_ps + slope·(x − anchor) rounded half away from zero
// to the ps (monotone, as order needs; |slope·(x − anchor)| stays far below
// 2^62). The correction (trace/correct/node_correction.h) computes every
// instant through one, and callers that map many instants of one piece
// (trace/correct/host_clock_map.h, MapCursor) through the same one.
struct LinearClockPiece {
  TraceInstant anchor;
  int64_t offset_ps = 0;
  double slope = 0;

  // nullopt on overflow; *offset_at gets o(x), *distance_ps x − anchor.
  std::optional<TraceInstant> Map(const TraceInstant& x, int64_t* offset_at = nullptr,
                                  int64_t* distance_ps = nullptr) const {
    const auto d = DiffPs(x, anchor);
    if (!d) return std::nullopt;
    const double v = slope * static_cast<double>(*d);
    const int64_t offset = offset_ps + static_cast<int64_t>(v < 0 ? v - 0.5 : v + 0.5);
    if (offset_at != nullptr) *offset_at = offset;
    if (distance_ps != nullptr) *distance_ps = *d;
    return SubPs(x, offset);
  }
};

// The bound of an instant between two solved knots of a correction, as a
// function of its distance d (ps, 0 <= d < the segment's length) from the
// left knot: trace/correct/node_correction.cc's interpolation bound,
// written once, so that the correction (Interpolate) and a caller that
// keeps a piece (trace/correct/host_clock_map.h, MapCursor) compute it with
// the same operations in the same order: the same double, to the bit.
// Edge holes widen it further; a piece that overlaps one has none of these.
struct InterpolationBound {
  double sigma_left_ns = 0;   // the knots' solved sigmas
  double sigma_right_ns = 0;
  double inverse_length = 0;  // 1 / the segment's length in ps
  double mismatch_left_ns = 0;
  double mismatch_right_ns = 0;
  double dt_ns = 0;
  double drift_uncertainty = 0;
  double coverage_factor = 0;
  double rounding_ns = 0;
  bool jump = false;
  bool gap = false;

  // *widened: a gap or a jump counts at d (never at the knot itself).
  double At(int64_t d, bool* widened) const {
    const double f = static_cast<double>(d) * inverse_length;
    const double sigma = (1 - f) * sigma_left_ns + f * sigma_right_ns;
    // Two slopes meeting anywhere in the segment stay within min(f·a, (1−f)·b)
    // of the chord; a jump anywhere, within the larger mismatch.
    // At the knot itself (d == 0) the offset is the solved one: no model term.
    const bool at_knot = d == 0;
    double model = at_knot ? 0.0
                   : jump  ? (mismatch_left_ns < mismatch_right_ns ? mismatch_right_ns : mismatch_left_ns)
                           : ((1 - f) * mismatch_right_ns < f * mismatch_left_ns ? (1 - f) * mismatch_right_ns
                                                                                 : f * mismatch_left_ns);
    if (gap) model += (1 - f < f ? 1 - f : f) * dt_ns * drift_uncertainty;
    *widened = (gap || jump) && !at_knot;
    return coverage_factor * sigma + model + rounding_ns;
  }
};

}  // namespace chronolink::trace
