// What alignment needs of a clock correction: one host's clock → cluster
// time, with a bound, for any instant. trace/correct/ implements it from
// offsets.jsonl; tests implement it from a known truth. Implementations must
// be non-decreasing in the instant (never swap two instants; instants 1 ps
// apart may tie after rounding to whole picoseconds), so events keep their order.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "trace/model/trace_time.h"

namespace chronolink::trace {

enum class MapQuality {
  kSolved,        // between solved instants of one reachable stretch
  kGap,           // across a stretch where the node was unreachable: bound widened
  kExtrapolated,  // before the first or after the last solved instant
};

struct MappedInstant {
  TraceInstant cluster;
  double uncertainty_ns = 0;   // bound on |cluster - truth| (see docs/trace-correction.md)
  MapQuality quality = MapQuality::kSolved;
  int64_t beyond_span_ns = 0;  // how far outside the solved span (extrapolated only)
  double correction_ns = 0;    // cluster - host at this instant
};

// A stretch of a map over which one formula holds: [from, to) on the host's
// clock (from > to never; from == to: an empty piece, which covers nothing).
// `index` is the implementation's (which formula). Events of a trace line
// come mostly in order, so a caller mapping them asks for the piece once
// and maps every instant it covers through it (MapCursor below).
struct MapPiece {
  TraceInstant from;
  TraceInstant to;
  size_t index = 0;
  // When `linear_known`: the cluster instant of every x the piece covers is
  // linear.Map(x), exactly Map(x)->cluster (the implementation computes it so).
  bool linear_known = false;
  LinearClockPiece linear;
  // When `bound_known` (with linear_known): for every x the piece covers,
  // Map(x) is MapWithBound(x) below, to the bit (the implementation
  // computes its bound through the same InterpolationBound).
  bool bound_known = false;
  InterpolationBound bound;
  bool Covers(const TraceInstant& x) const { return !(x < from) && x < to; }
  [[gnu::always_inline]] std::optional<MappedInstant> MapWithBound(const TraceInstant& x) const {
    int64_t offset_ps = 0, d = 0;
    const auto cluster = linear.Map(x, &offset_ps, &d);
    if (!cluster) return std::nullopt;
    MappedInstant m;
    m.cluster = *cluster;
    bool widened = false;
    m.uncertainty_ns = bound.At(d, &widened);
    m.quality = widened ? MapQuality::kGap : MapQuality::kSolved;
    m.beyond_span_ns = 0;
    m.correction_ns = static_cast<double>(-offset_ps) / 1000.0;
    return m;
  }
};

class HostClockMap {
 public:
  virtual ~HostClockMap() = default;
  // nullopt: no correction exists for this instant (nothing solved at all,
  // or the arithmetic would overflow).
  virtual std::optional<MappedInstant> Map(const TraceInstant& host_time) const = 0;
  // The piece around `host_time`: for every x it covers, MapInPiece(piece,
  // x) is exactly Map(x). Implementations define Map through these two, so
  // the two can never disagree. The default is an empty piece (no reuse).
  virtual MapPiece PieceAt(const TraceInstant& host_time) const {
    MapPiece empty;
    empty.from = empty.to = host_time;
    return empty;
  }
  virtual std::optional<MappedInstant> MapInPiece(const MapPiece& piece, const TraceInstant& host_time) const {
    return Map(host_time);
  }
  // One line for the output's provenance: the node, the offsets source, the span.
  virtual std::string Describe() const = 0;
};

// Maps instants through the piece of the last one while they stay in it:
// exactly Map's values, without its search. One per thread.
// The usual case (the instant in the held piece, whose formula is known)
// is inline in the caller; leaving the piece, or a piece the map computes
// itself, takes the out-of-line call: the same values either way.
class MapCursor {
 public:
  explicit MapCursor(const HostClockMap& map) : map_(map) {}
  [[gnu::always_inline]] std::optional<MappedInstant> Map(const TraceInstant& x) {
    if (piece_.bound_known && piece_.Covers(x)) [[likely]] return piece_.MapWithBound(x);
    return MapElsewhere(x);
  }
  // Map(x)->cluster alone: for instants whose bound nobody reads.
  [[gnu::always_inline]] std::optional<TraceInstant> Cluster(const TraceInstant& x) {
    if (piece_.linear_known && piece_.Covers(x)) [[likely]] return piece_.linear.Map(x);
    return ClusterElsewhere(x);
  }

 private:
  [[gnu::noinline]] std::optional<MappedInstant> MapElsewhere(const TraceInstant& x) {
    if (!piece_.Covers(x)) piece_ = map_.PieceAt(x);
    if (piece_.bound_known) return piece_.MapWithBound(x);  // no virtual call, no search
    return map_.MapInPiece(piece_, x);
  }
  [[gnu::noinline]] std::optional<TraceInstant> ClusterElsewhere(const TraceInstant& x) {
    if (!piece_.Covers(x)) piece_ = map_.PieceAt(x);
    if (piece_.linear_known) return piece_.linear.Map(x);
    const auto m = map_.MapInPiece(piece_, x);
    return m ? std::optional<TraceInstant>(m->cluster) : std::nullopt;
  }

  const HostClockMap& map_;
  MapPiece piece_;  // empty until the first instant
};

}  // namespace chronolink::trace
