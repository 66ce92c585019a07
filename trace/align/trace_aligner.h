// Rewrites hosts' traces onto cluster time with one common origin: every
// event's start and end are mapped by its host's correction at their own
// instants (drift over a long profile matters: 100 ppm over 60 s is 6 ms),
// lines are re-based on the common origin, and what was applied is recorded
// in the trace (trace/align/correction_record.h). Single-threaded; the
// traces are changed in place.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "trace/correct/host_clock_map.h"
#include "trace/model/host_span.h"
#include "trace/model/host_trace.h"

namespace chronolink::trace {

struct AlignOptions {
  // Events further than this outside the solved span are refused (the host
  // fails with a clear message) instead of being extrapolated on.
  int64_t max_extrapolation_ns = 600'000'000'000;  // 10 min
  // A host whose events' bound exceeds this fails (a trace in a long stretch
  // where its node was unreachable): a wide bound is stated, never hidden,
  // and past this it is refused rather than shipped.
  double max_bound_ns = 100'000;  // 100 µs
  // Also draw the correction as a `_counters_` line on each host's CPU plane.
  bool counters_line = true;
  // Give every event a `chronolink_bound_ns` stat: the bound of its own
  // correction (in Chrome JSON an arg). Off by default: it grows the file.
  bool annotate_events = false;
  std::string offsets_source;  // for the provenance record: what the maps came from
};

// What alignment did to one host, for the summary and the provenance record.
struct HostAlignment {
  std::string host;
  std::string map_description;
  int64_t events = 0;              // events re-timed (starts and ends)
  int64_t events_gap = 0;          // events whose start fell in a gap
  int64_t events_extrapolated = 0; // events whose start fell outside the solved span
  int64_t max_beyond_span_ns = 0;
  double correction_first_ns = 0;  // cluster - host at the host's first instant
  double correction_last_ns = 0;   // ... and at its last
  double uncertainty_min_ns = 0;   // over event starts
  double uncertainty_max_ns = 0;
  double uncertainty_mean_ns = 0;
  TraceInstant first_host{};       // the host's first and last instants, its own clock
  TraceInstant last_host{};
};

struct AlignResult {
  int64_t origin_ns = 0;  // the common origin, cluster time: every host's lines are relative to it
  std::vector<HostAlignment> hosts;
};

// hosts[i] is corrected by maps[i]. Every host must be on its own clock with
// a known line base. On failure *error names the host, plane and line, and
// the traces may be partly rewritten (callers discard them).
bool AlignHosts(std::vector<HostTrace*> hosts, const std::vector<const HostClockMap*>& maps,
                const AlignOptions& options, AlignResult* result, std::string* error);

// The same one host at a time, for runs too large to hold at once: first
// the plan, from every host's span alone (HostSpan, or the wire-level scan
// of its file, trace/wire/xspace_span_scan.h): the common
// origin and each host's correction at its ends, checked against
// max_extrapolation_ns. Then each host, read when its turn comes, is
// aligned on that plan and can be written and freed before the next is read.
// AlignPlannedHost refuses a host whose span is not the one planned (the
// origin could then follow one of its events).
// Whether a host trace can be aligned at all: on its own clock, with a known
// line base. False with the reason (and what to give) in *error.
bool CheckAlignable(const HostTrace& host, std::string* error);

bool PlanAlignment(const std::vector<std::string>& hosts, const std::vector<HostSpanInstants>& spans,
                   const std::vector<const HostClockMap*>& maps, const AlignOptions& options,
                   AlignResult* result, std::string* error);
// One host's entry of the plan from its span: the ends mapped (stats'
// first/last and corrections), how far they lie outside the solved span
// checked; *mapped_first is the host's first instant on cluster time (the
// origin is the least over the hosts).
bool PlanHostSpan(const std::string& host, const HostSpanInstants& span, const HostClockMap& map,
                  const AlignOptions& options, HostAlignment* stats, TraceInstant* mapped_first,
                  std::string* error);
bool AlignPlannedHost(size_t index, HostTrace* host, const HostClockMap& map, const AlignOptions& options,
                      AlignResult* result, std::string* error);

// An empty line's new timestamp (on the common origin) and duration: its
// start and end mapped as any line's, or, where they cannot be (a timestamp
// ~106 days or more from the solved offsets, which producers may leave in
// an empty line), only re-based, the duration kept. nullopt when even that
// passes int64 ns. Shared by the model path and the wire-level rewrite.
struct EmptyLineRebased {
  int64_t timestamp_ns = 0;
  int64_t duration_ps = 0;
};
std::optional<EmptyLineRebased> EmptyLineTimes(const HostClockMap& map, int64_t line_base_ns, int64_t timestamp_ns,
                                               int64_t duration_ps, int64_t origin_ns);

// AlignPlannedHost's steps after the events, for a caller that re-times the
// events itself (the wire-level rewrite, trace/wire/xspace_wire_align.h):
// whether the host's bound is within options (false with the message the
// model path gives), and the Task Environment's profile_start/stop_time set
// on the plan in `task_env` (a space whose first Task Environment plane is
// the host's; nullptr when the host has none: then nothing is set).
// Counts one re-timed event, mapped at its start, into `stats` (events,
// gaps, extrapolation, bound min/max) and `*uncertainty_sum` (for the mean).
void CountMappedEvent(const MappedInstant& start, HostAlignment* stats, double* uncertainty_sum);
// Whether a plane's events count in those statistics: all but the GPU
// collector's clock record (trace/correct/recorded_mapping.h), re-timed
// like the rest but not the profile: each clock page mapping sits where the
// collector read it, the solve's lag after the instant it maps, so its last
// ones always lie past the correction's span.
bool CountsInAlignmentStats(std::string_view plane_name);
bool CheckPlannedBound(const HostAlignment& stats, const AlignOptions& options, std::string* error);
void SetSessionOnPlan(const HostClockMap& map, const HostAlignment& stats, const AlignResult& result,
                      xspace::XSpace* task_env);

}  // namespace chronolink::trace
