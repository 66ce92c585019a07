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
std::optional<int64_t> DiffPs(const TraceInstant& to, const TraceInstant& from);
// Adds ps to an instant; nullopt on overflow.
std::optional<TraceInstant> AddPs(const TraceInstant& t, int64_t ps);

}  // namespace chronolink::trace
