#include "trace/align/trace_aligner.h"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <optional>

#include "trace/align/correction_record.h"
#include "trace/correct/recorded_mapping.h"
#include "trace/model/host_span.h"
#include "common/quoted_text.h"
#include "trace/model/xplane_edit.h"

namespace chronolink::trace {
namespace {

bool Timed(const xspace::XEvent& e) { return e.data_case() != xspace::XEvent::kNumOccurrences; }

std::string Where(const HostTrace& host, const xspace::XPlane& plane, const xspace::XLine& line) {
  return "host " + ShownName(host.host) + ", plane " + QuotedText(plane.name()) + ", line " + QuotedText(line.name());
}

}  // namespace

std::optional<EmptyLineRebased> EmptyLineTimes(const HostClockMap& map, int64_t line_base_ns, int64_t timestamp_ns,
                                               int64_t duration_ps, int64_t origin_ns) {
  int64_t start_ns = 0;
  if (!__builtin_add_overflow(line_base_ns, timestamp_ns, &start_ns)) {
    const TraceInstant start{start_ns, 0};
    const auto mapped = map.Map(start);
    EmptyLineRebased out{.timestamp_ns = 0, .duration_ps = duration_ps};
    if (mapped && !__builtin_sub_overflow(mapped->cluster.ns, origin_ns, &out.timestamp_ns)) {
      const auto end = duration_ps != 0 ? AddPs(start, duration_ps) : std::nullopt;
      const auto mapped_end = end ? map.Map(*end) : std::nullopt;
      const auto d = mapped_end ? DiffPs(mapped_end->cluster, mapped->cluster) : std::nullopt;
      if (d) out.duration_ps = *d;  // else kept, as where nothing maps
      return out;
    }
  }
  // Unmapped: the base's distance to the origin first, so that a far
  // timestamp on a near base still fits.
  EmptyLineRebased out{.timestamp_ns = 0, .duration_ps = duration_ps};
  int64_t shift = 0;
  if (__builtin_sub_overflow(line_base_ns, origin_ns, &shift) ||
      __builtin_add_overflow(shift, timestamp_ns, &out.timestamp_ns)) {
    return std::nullopt;
  }
  return out;
}

namespace {

class HostRewriter {
 public:
  HostRewriter(HostTrace* host, const HostClockMap& map, int64_t origin_ns, bool annotate,
               HostAlignment* stats)
      : host_(host), map_(map), origin_ns_(origin_ns), annotate_(annotate), stats_(stats) {}

  bool Run(std::string* error) {
    for (auto& plane : *host_->space->mutable_planes()) {
      if (plane.name() == kTaskEnvPlaneName) continue;
      counted_ = CountsInAlignmentStats(plane.name());
      if (annotate_) bound_stat_id_ = GetOrCreateStatMetadata(&plane, kEventBoundStat)->id();
      source_bound_stat_id_ = FindStatMetadataId(plane, kSourceBoundStat);
      for (auto& line : *plane.mutable_lines()) {
        if (!RewriteLine(plane, &line, error)) return false;
      }
    }
    if (stats_->events > 0) uncertainty_sum_ /= static_cast<double>(stats_->events);
    stats_->uncertainty_mean_ns = uncertainty_sum_;
    return true;
  }

 private:
  bool RewriteLine(const xspace::XPlane& plane, xspace::XLine* line, std::string* error) {
    if (line->events_size() == 0) return RebaseEmptyLine(plane, line, error);
    const TraceInstant line_start{host_->line_base_ns + line->timestamp_ns(), 0};
    const auto mapped_start = map_.Map(line_start);
    int64_t new_ts = 0;
    if (!mapped_start ||
        __builtin_sub_overflow(mapped_start->cluster.ns, origin_ns_, &new_ts)) {
      *error = Where(*host_, plane, *line) + ": the line's start cannot be mapped to cluster time";
      return false;
    }
    const TraceInstant new_base{origin_ns_ + new_ts, 0};
    for (auto& event : *line->mutable_events()) {
      if (!Timed(event)) continue;
      if (!RewriteEvent(*line, new_base, &event)) {
        *error = Where(*host_, plane, *line) +
                 ": an event overflows int64 picoseconds when re-based on the common origin";
        return false;
      }
    }
    if (line->duration_ps() != 0) {
      const auto end = AddPs(line_start, line->duration_ps());
      const auto mapped_end = end ? map_.Map(*end) : std::nullopt;
      const auto d = mapped_end ? DiffPs(mapped_end->cluster, mapped_start->cluster) : std::nullopt;
      if (!d) {
        *error = Where(*host_, plane, *line) + ": the line's duration cannot be mapped";
        return false;
      }
      line->set_duration_ps(*d);
    }
    line->set_timestamp_ns(new_ts);
    return true;
  }

  // An empty line has nothing to re-time: its start is mapped like any
  // line's where it can be, and otherwise (a timestamp further from the
  // solved offsets than int64 picoseconds reach, ~106 days: producers put
  // any value there) only re-based on the common origin, its duration kept
  // (EmptyLineTimes, shared with the wire-level rewrite).
  bool RebaseEmptyLine(const xspace::XPlane& plane, xspace::XLine* line, std::string* error) {
    const auto times = EmptyLineTimes(map_, host_->line_base_ns, line->timestamp_ns(), line->duration_ps(), origin_ns_);
    if (!times) {
      *error = Where(*host_, plane, *line) + ": the empty line's start cannot be re-based on the common origin";
      return false;
    }
    line->set_timestamp_ns(times->timestamp_ns);
    line->set_duration_ps(times->duration_ps);
    return true;
  }

  bool RewriteEvent(const xspace::XLine& line, const TraceInstant& new_base, xspace::XEvent* event) {
    const auto start = EventStart(host_->line_base_ns, line, *event);
    const auto end = EventEnd(host_->line_base_ns, line, *event);
    if (!start || !end) return false;
    const auto ms = map_.Map(*start);
    const auto me = map_.Map(*end);
    if (!ms || !me) return false;
    const auto offset = DiffPs(ms->cluster, new_base);
    const auto duration = DiffPs(me->cluster, ms->cluster);
    if (!offset || !duration) return false;
    event->set_offset_ps(*offset);
    event->set_duration_ps(*duration);
    if (annotate_) {
      xspace::XStat* stat = event->add_stats();
      stat->set_metadata_id(bound_stat_id_);
      stat->set_double_value(std::max(ms->uncertainty_ns, me->uncertainty_ns) + SourceBound(*event));
    }
    if (counted_) Count(*ms);
    return true;
  }

  // The producer's own bound on the event's host time (0 when it gave none).
  double SourceBound(const xspace::XEvent& event) const {
    if (!source_bound_stat_id_) return 0;
    for (const auto& st : event.stats()) {
      if (st.metadata_id() != *source_bound_stat_id_) continue;
      switch (st.value_case()) {
        case xspace::XStat::kInt64Value: return static_cast<double>(st.int64_value());
        case xspace::XStat::kUint64Value: return static_cast<double>(st.uint64_value());
        case xspace::XStat::kDoubleValue: return st.double_value();
        default: return 0;
      }
    }
    return 0;
  }

  void Count(const MappedInstant& m) { CountMappedEvent(m, stats_, &uncertainty_sum_); }

  HostTrace* host_;
  const HostClockMap& map_;
  int64_t origin_ns_;
  bool annotate_;
  std::optional<int64_t> source_bound_stat_id_;
  int64_t bound_stat_id_ = 0;
  HostAlignment* stats_;
  bool counted_ = true;  // the plane's events count in stats_
  double uncertainty_sum_ = 0;
};

bool CheckBound(const HostAlignment& h, const AlignOptions& options, std::string* error) {
  if (h.uncertainty_max_ns <= options.max_bound_ns) return true;
  char text[320];
  std::snprintf(text, sizeof text,
                "host %s: events would be placed with a bound of up to %.1f us (limit %.1f us, "
                "--max-bound-us): %lld events fall in gaps of the offsets and %lld outside them. "
                "Were the agents running and connected during the profile?",
                ShownName(h.host).c_str(), h.uncertainty_max_ns / 1e3, options.max_bound_ns / 1e3,
                static_cast<long long>(h.events_gap), static_cast<long long>(h.events_extrapolated));
  *error = text;
  return false;
}

}  // namespace

void SetSessionOnPlan(const HostClockMap& map, const HostAlignment& stats, const AlignResult& result,
                      xspace::XSpace* task_env) {
  if (task_env == nullptr) return;
  const int64_t origin = result.origin_ns;
  const auto mapped_last = map.Map(stats.last_host);
  SetProfileStartTime(task_env, static_cast<uint64_t>(origin));
  SetProfileStopTime(task_env, static_cast<uint64_t>(mapped_last ? mapped_last->cluster.ns : origin));
}

void CountMappedEvent(const MappedInstant& m, HostAlignment* stats, double* uncertainty_sum) {
  if (stats->events == 0) {
    stats->uncertainty_min_ns = stats->uncertainty_max_ns = m.uncertainty_ns;
  }
  ++stats->events;
  stats->uncertainty_min_ns = std::min(stats->uncertainty_min_ns, m.uncertainty_ns);
  stats->uncertainty_max_ns = std::max(stats->uncertainty_max_ns, m.uncertainty_ns);
  *uncertainty_sum += m.uncertainty_ns;
  stats->events_gap += m.quality == MapQuality::kGap;
  if (m.quality == MapQuality::kExtrapolated) {
    ++stats->events_extrapolated;
    stats->max_beyond_span_ns = std::max(stats->max_beyond_span_ns, m.beyond_span_ns);
  }
}

bool CountsInAlignmentStats(std::string_view plane_name) { return plane_name != kRecordedMappingPlane; }

bool CheckPlannedBound(const HostAlignment& stats, const AlignOptions& options, std::string* error) {
  return CheckBound(stats, options, error);
}

namespace {

// Rewrites one host on the planned origin and records what was applied.
bool AlignOnPlan(HostTrace* host, const HostClockMap& map, const AlignOptions& options, HostAlignment* stats,
                 const AlignResult& result, std::string* error) {
  const int64_t origin = result.origin_ns;
  if (!HostRewriter(host, map, origin, options.annotate_events, stats).Run(error)) return false;
  if (!CheckBound(*stats, options, error)) return false;
  host->line_base_ns = origin;
  host->clock = TraceClock::kClusterTime;
  // XSpace inputs: XProf reads the Task Environment.
  SetSessionOnPlan(map, *stats, result, FindPlane(*host->space, kTaskEnvPlaneName) ? host->space : nullptr);
  RecordCorrection(map, *stats, result, options, host);
  return true;
}

}  // namespace

bool CheckAlignable(const HostTrace& h, std::string* error) {
  if (h.clock != TraceClock::kHostRealtime) {
    *error = "host " + ShownName(h.host) + " is already on cluster time (aligned twice?)";
    return false;
  }
  if (!h.line_base_known) {
    *error = "host " + ShownName(h.host) + " (" + h.source.string() +
             "): its timestamps are relative to an unknown start; give the start "
             "(--origin HOST=NS, or the .chronolink-origin.json sidecar)";
    return false;
  }
  return true;
}

// Maps the host's span ends and checks how far they lie outside the solved span.
bool PlanHostSpan(const std::string& host, const HostSpanInstants& span, const HostClockMap& map,
             const AlignOptions& options, HostAlignment* stats, TraceInstant* mapped_first,
             std::string* error) {
  stats->host = host;
  stats->first_host = span.first;
  stats->last_host = span.last;
  const auto first = map.Map(span.first);
  const auto last = map.Map(span.last);
  if (!first || !last) {
    *error = "host " + ShownName(host) + ": no clock correction covers its trace (" + map.Describe() + ")";
    return false;
  }
  const int64_t beyond = std::max(first->beyond_span_ns, last->beyond_span_ns);
  if (beyond > options.max_extrapolation_ns) {
    *error = "host " + ShownName(host) + ": its trace reaches " + std::to_string(beyond / 1'000'000) +
             " ms outside the solved offsets (limit " +
             std::to_string(options.max_extrapolation_ns / 1'000'000) +
             " ms, --max-extrapolation-s): were the offsets recorded during this profile?";
    return false;
  }
  stats->correction_first_ns = first->correction_ns;
  stats->correction_last_ns = last->correction_ns;
  stats->map_description = map.Describe();
  *mapped_first = first->cluster;
  return true;
}

bool PlanAlignment(const std::vector<std::string>& hosts, const std::vector<HostSpanInstants>& spans,
                   const std::vector<const HostClockMap*>& maps, const AlignOptions& options,
                   AlignResult* result, std::string* error) {
  if (hosts.empty()) {
    *error = "no traces to align";
    return false;
  }
  if (hosts.size() != maps.size() || hosts.size() != spans.size()) {
    *error = "internal: one clock map and one span per host are needed";
    return false;
  }
  result->hosts.assign(hosts.size(), HostAlignment{});
  int64_t origin = std::numeric_limits<int64_t>::max();
  for (size_t i = 0; i < hosts.size(); ++i) {
    if (maps[i] == nullptr) {
      *error = "host " + ShownName(hosts[i]) + " has no clock correction";
      return false;
    }
    TraceInstant mapped_first;
    if (!PlanHostSpan(hosts[i], spans[i], *maps[i], options, &result->hosts[i], &mapped_first, error)) return false;
    origin = std::min(origin, mapped_first.ns);  // dropping ps floors: the origin precedes every event
  }
  result->origin_ns = origin;
  return true;
}

bool AlignPlannedHost(size_t index, HostTrace* host, const HostClockMap& map, const AlignOptions& options,
                      AlignResult* result, std::string* error) {
  if (index >= result->hosts.size()) {
    *error = "internal: host " + host->host + " is not in the plan";
    return false;
  }
  if (!CheckAlignable(*host, error)) return false;
  HostAlignment& stats = result->hosts[index];
  HostSpanInstants span;
  if (!HostSpan(*host, &span, error)) return false;
  if (span.first != stats.first_host || span.last != stats.last_host) {
    *error = "host " + ShownName(host->host) + ": its span read from the parsed file differs from the span planned " +
             "before (a bug in the span scan, or the file changed in between: please report it)";
    return false;
  }
  return AlignOnPlan(host, map, options, &stats, *result, error);
}

bool AlignHosts(std::vector<HostTrace*> hosts, const std::vector<const HostClockMap*>& maps,
                const AlignOptions& options, AlignResult* result, std::string* error) {
  if (hosts.size() != maps.size()) {
    *error = "internal: one clock map per host is needed";
    return false;
  }
  std::vector<std::string> names;
  std::vector<HostSpanInstants> spans(hosts.size());
  for (size_t i = 0; i < hosts.size(); ++i) {
    if (!CheckAlignable(*hosts[i], error) || !HostSpan(*hosts[i], &spans[i], error)) return false;
    names.push_back(hosts[i]->host);
  }
  if (!PlanAlignment(names, spans, maps, options, result, error)) return false;
  for (size_t i = 0; i < hosts.size(); ++i) {
    if (!AlignOnPlan(hosts[i], *maps[i], options, &result->hosts[i], *result, error)) return false;
  }
  return true;
}

}  // namespace chronolink::trace
