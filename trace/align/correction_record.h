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
// A producer's own bound on an event's host-clock time (the GPU collector's
// GPU -> host conversion, collector/export/device_planes.h). Alignment adds
// it to the correction's bound in kEventBoundStat: the event's whole bound.
inline constexpr char kSourceBoundStat[] = "chronolink_gpu_bound_ns";

void RecordCorrection(const HostClockMap& map, const HostAlignment& stats, const AlignResult& result,
                      const AlignOptions& options, HostTrace* host);

}  // namespace chronolink::trace
