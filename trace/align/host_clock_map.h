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

class HostClockMap {
 public:
  virtual ~HostClockMap() = default;
  // nullopt: no correction exists for this instant (nothing solved at all,
  // or the arithmetic would overflow).
  virtual std::optional<MappedInstant> Map(const TraceInstant& host_time) const = 0;
  // One line for the output's provenance: the node, the offsets source, the span.
  virtual std::string Describe() const = 0;
};

}  // namespace chronolink::trace
