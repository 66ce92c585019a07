// Records in an aligned trace what alignment applied, so the file carries
// its own provenance: a plane XProf does not draw
// (`/host:chronolink-clock-correction`: the offsets source, the host's
// correction and its uncertainty as stats, and a `correction` line sampling
// both over the host's span), and optionally a `_counters_` line on the
// host's CPU plane that XProf draws as counter tracks (docs/traces.md).
#pragma once

#include "trace/align/trace_aligner.h"
#include "trace/correct/host_clock_map.h"
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
// The same on the planes alone, for callers that hold no model of the
// whole trace (the wire-level rewrite, trace/wire/xspace_wire_align.h):
// the record plane's stats and correction line, and the `_counters_` line
// with its metadata on the host's counters plane (FindCountersPlane), which
// reads only the host's span from `stats` and is drawn only when
// options.counters_line. RecordCorrection is the two on one trace.
void RecordCorrectionPlane(const HostClockMap& map, const HostAlignment& stats, const AlignResult& result,
                           const AlignOptions& options, xspace::XPlane* record);
void AddCountersLine(const HostClockMap& map, const HostAlignment& stats, const AlignResult& result,
                     xspace::XPlane* cpu);
// The plane the `_counters_` line goes on: the first named /host:CPU...
xspace::XPlane* FindCountersPlane(xspace::XSpace* space);
inline constexpr char kCountersPlanePrefix[] = "/host:CPU";

}  // namespace chronolink::trace
