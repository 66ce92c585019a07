#include "trace/align/correction_record.h"

#include <string>

#include "trace/model/xplane_edit.h"

namespace chronolink::trace {
namespace {

constexpr int kSamples = 64;  // points of the correction line per host

void AddEventStat(xspace::XPlane* plane, xspace::XEvent* event, std::string_view name, double value) {
  xspace::XStat* stat = event->add_stats();
  stat->set_metadata_id(GetOrCreateStatMetadata(plane, name)->id());
  stat->set_double_value(value);
}

void AddEventStat(xspace::XPlane* plane, xspace::XEvent* event, std::string_view name,
                  std::string_view value) {
  xspace::XStat* stat = event->add_stats();
  stat->set_metadata_id(GetOrCreateStatMetadata(plane, name)->id());
  stat->set_str_value(std::string(value));
}

xspace::XPlane* FindPlaneWithPrefix(xspace::XSpace* space, std::string_view prefix) {
  for (auto& plane : *space->mutable_planes()) {
    if (plane.name().starts_with(prefix)) return &plane;
  }
  return nullptr;
}

const char* QualityName(MapQuality q) {
  switch (q) {
    case MapQuality::kSolved: return "solved";
    case MapQuality::kGap: return "gap";
    case MapQuality::kExtrapolated: return "extrapolated";
  }
  return "?";
}

void AddSummaryStats(const HostAlignment& s, const AlignResult& result, const AlignOptions& options,
                     xspace::XPlane* plane) {
  SetPlaneStatStr(plane, "host", s.host);
  SetPlaneStatStr(plane, "offsets_source", options.offsets_source);
  SetPlaneStatStr(plane, "correction_model", s.map_description);
  SetPlaneStatInt64(plane, "common_origin_ns", result.origin_ns);
  SetPlaneStatDouble(plane, "correction_first_ns", s.correction_first_ns);
  SetPlaneStatDouble(plane, "correction_last_ns", s.correction_last_ns);
  SetPlaneStatDouble(plane, "uncertainty_min_ns", s.uncertainty_min_ns);
  SetPlaneStatDouble(plane, "uncertainty_mean_ns", s.uncertainty_mean_ns);
  SetPlaneStatDouble(plane, "uncertainty_max_ns", s.uncertainty_max_ns);
  SetPlaneStatInt64(plane, "events_corrected", s.events);
  SetPlaneStatInt64(plane, "events_in_gaps", s.events_gap);
  SetPlaneStatInt64(plane, "events_extrapolated", s.events_extrapolated);
  SetPlaneStatInt64(plane, "max_beyond_span_ns", s.max_beyond_span_ns);
}

// One event per sample instant, on cluster time, with the correction and its
// bound as stats. `counters` lines carry numbers only.
void AddSampleLine(const HostClockMap& map, const HostAlignment& s, int64_t origin_ns,
                   bool counters, xspace::XPlane* plane) {
  xspace::XLine* line = GetOrCreateLine(plane, counters ? kCountersLine : kCorrectionLine);
  // A producer's own `_counters_` line may be there already: the samples go
  // after its events, relative to its start; an empty one's start means
  // nothing (the reader's base rule ignores it), so it becomes the origin.
  if (line->events_size() == 0) line->set_timestamp_ns(0);
  int64_t line_start_ns = 0;
  if (__builtin_add_overflow(origin_ns, line->timestamp_ns(), &line_start_ns)) return;
  const int64_t event_id =
      GetOrCreateEventMetadata(plane, counters ? "chronolink correction (ns)" : "clock correction")->id();
  const auto span = DiffPs(s.last_host, s.first_host).value_or(0);
  for (int i = 0; i < kSamples; ++i) {
    const auto at = AddPs(s.first_host, span / (kSamples - 1) * i);
    const auto m = at ? map.Map(*at) : std::nullopt;
    const auto offset = m ? DiffPs(m->cluster, {line_start_ns, 0}) : std::nullopt;
    if (!offset) continue;
    xspace::XEvent* e = line->add_events();
    e->set_metadata_id(event_id);
    e->set_offset_ps(*offset);
    AddEventStat(plane, e, "correction_ns", m->correction_ns);
    AddEventStat(plane, e, "uncertainty_ns", m->uncertainty_ns);
    if (!counters) AddEventStat(plane, e, "quality", std::string_view(QualityName(m->quality)));
  }
}

}  // namespace

xspace::XPlane* FindCountersPlane(xspace::XSpace* space) { return FindPlaneWithPrefix(space, kCountersPlanePrefix); }

void RecordCorrectionPlane(const HostClockMap& map, const HostAlignment& stats, const AlignResult& result,
                           const AlignOptions& options, xspace::XPlane* record) {
  AddSummaryStats(stats, result, options, record);
  AddSampleLine(map, stats, result.origin_ns, /*counters=*/false, record);
}

void AddCountersLine(const HostClockMap& map, const HostAlignment& stats, const AlignResult& result,
                     xspace::XPlane* cpu) {
  AddSampleLine(map, stats, result.origin_ns, /*counters=*/true, cpu);
}

void RecordCorrection(const HostClockMap& map, const HostAlignment& stats, const AlignResult& result,
                      const AlignOptions& options, HostTrace* host) {
  RecordCorrectionPlane(map, stats, result, options, GetOrCreatePlane(host->space, kCorrectionPlane));
  if (!options.counters_line) return;
  if (xspace::XPlane* cpu = FindCountersPlane(host->space)) AddCountersLine(map, stats, result, cpu);
}

}  // namespace chronolink::trace
