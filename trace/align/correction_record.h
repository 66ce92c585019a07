// Records in an aligned trace what alignment applied, so the file carries
// its own provenance: a plane XProf does not draw
// (`/host:chronolink-clock-correction`: the offsets source, the host's
// correction and its uncertainty as stats, and a `correction` line sampling
// both over the host's span), and optionally a `_counters_` line on the
// host's CPU plane that XProf draws as counter tracks (docs/traces.md).
#pragma once

#include "trace/align/host_clock_map.h"
#include "trace/align/trace_aligner.h"
#include "trace/model/host_trace.h"

namespace chronolink::trace {

inline constexpr char kCorrectionPlane[] = "/host:chronolink-clock-correction";
inline constexpr char kCorrectionLine[] = "correction";
inline constexpr char kCountersLine[] = "_counters_";
inline constexpr char kEventBoundStat[] = "chronolink_bound_ns";  // AlignOptions::annotate_events

void RecordCorrection(const HostClockMap& map, const HostAlignment& stats, const AlignResult& result,
                      const AlignOptions& options, HostTrace* host);

}  // namespace chronolink::trace
