// The GPU clock plane (clock_plane.h).
#include "collector/export/clock_plane.h"

#include <algorithm>
#include <string>

#include "collector/export/plane_writer.h"
#include "trace/correct/recorded_mapping.h"
#include "trace/model/xplane_edit.h"

namespace chronolink::collector {
namespace {

// One line of the plane: a GPU map or a host clock domain, with its knots
// sorted by their REALTIME instant.
struct ClockSource {
  std::string line_name;
  const DeviceExport* device = nullptr;          // the map's device (null for a domain)
  const HostDomainConversion* domain = nullptr;  // the domain (null for a map)
  std::vector<DeviceClockKnot> knots;
};

std::vector<ClockSource> CollectSources(const std::vector<DeviceExport>& devices) {
  std::vector<ClockSource> out;
  std::vector<const HostDomainConversion*> seen;
  for (const DeviceExport& d : devices) {
    ClockSource s;
    if (d.map != nullptr) {
      s.line_name = "GPU " + std::to_string(d.info.ordinal) + " clock map";
      s.device = &d;
      s.knots = d.map->Knots();
    } else if (d.host_domain != nullptr) {
      // Several devices imported from one profile share one recording.
      if (std::find(seen.begin(), seen.end(), d.host_domain) != seen.end()) continue;
      seen.push_back(d.host_domain);
      s.line_name = std::string(d.host_domain->domain_name()) + " -> realtime";
      s.domain = d.host_domain;
      s.knots = d.host_domain->Samples();
    } else {
      continue;
    }
    std::stable_sort(s.knots.begin(), s.knots.end(), [](const DeviceClockKnot& a, const DeviceClockKnot& b) {
      return a.host_ns < b.host_ns;
    });
    out.push_back(std::move(s));
  }
  return out;
}

void AddMapStats(PlaneWriter* w, xspace::XEvent* e, const DeviceExport& d) {
  const DeviceClockMapStats& m = d.map->stats();
  w->AddStr(e, "device_name", d.info.name);
  w->AddStr(e, "clock", d.info.clock);
  w->AddUint(e, "counter_hz", d.info.counter_hz);
  w->AddInt(e, "counter_bits", d.info.counter_bits);
  w->AddUint(e, "samples", m.samples);
  w->AddUint(e, "accepted", m.accepted);
  w->AddUint(e, "rejected_wide", m.rejected_wide);
  w->AddUint(e, "rejected_invalid", m.rejected_invalid);
  w->AddUint(e, "rejected_backwards", m.rejected_backwards);
  w->AddUint(e, "segments", m.segments);
  w->AddUint(e, "thinned", m.thinned);
  w->AddInt(e, "last_bracket_ns", m.last_bracket_ns);
  w->AddInt(e, "max_fit_residual_ns", m.max_fit_residual_ns);
}

void AddDomainStats(PlaneWriter* w, xspace::XEvent* e, const ClockSource& s) {
  w->AddStr(e, "domain", s.domain->domain_name());
  w->AddUint(e, "samples", s.knots.size());
  uint32_t max_segment = 0;
  for (const DeviceClockKnot& k : s.knots) max_segment = std::max(max_segment, k.segment);
  w->AddUint(e, "segments", s.knots.empty() ? 0 : uint64_t{max_segment} + 1);
}

void WriteSource(PlaneWriter* w, const ClockSource& s) {
  xspace::XLine* line = trace::GetOrCreateLine(w->plane(), s.line_name);
  if (s.knots.empty()) return;  // an empty line: XProf and readers skip it
  xspace::XEvent* summary = w->AddEvent(line, "map", s.knots.front().host_ns, s.knots.back().host_ns);
  if (summary != nullptr) {
    if (s.device != nullptr) {
      AddMapStats(w, summary, *s.device);
    } else {
      AddDomainStats(w, summary, s);
    }
  }
  for (const DeviceClockKnot& k : s.knots) {
    xspace::XEvent* e = w->AddEvent(line, "knot", k.host_ns, k.host_ns);
    if (e == nullptr) continue;  // beyond the line's picosecond range: cannot occur within 106 days
    w->AddInt(e, "device_ns", k.device_ns);
    w->AddInt(e, "error_ns", k.error_ns);
    w->AddUint(e, "segment", k.segment);
  }
}

void SetPlaneStats(xspace::XPlane* plane, const DeviceExportOptions& o, const DeviceExportStats& stats) {
  trace::SetPlaneStatStr(plane, "backend", o.backend.empty() ? "none" : o.backend);
  trace::SetPlaneStatInt64(plane, "events_written", stats.events_written);
  trace::SetPlaneStatInt64(plane, "events_unconvertible", stats.events_unconvertible);
  trace::SetPlaneStatInt64(plane, "events_invalid", stats.events_invalid);
  trace::SetPlaneStatInt64(plane, "max_gpu_bound_ns", stats.max_bound_ns);
  if (o.cluster_mappings.mappings.empty()) return;
  // The last mapping as plane stats too: what readers before the line read.
  for (const auto& [name, value] : trace::RecordedMappingStats(o.cluster_mappings.mappings.back())) {
    trace::SetPlaneStatInt64(plane, name, value);
  }
  trace::SetPlaneStatInt64(plane, trace::kRecordedNodeStat, o.cluster_mappings.node_id);
}

// Where a mapping's event goes: where the collector first read it, or a
// stopped run's stop for one read after it.
int64_t PlacedAt(const trace::RecordedMapping& m, int64_t stopped_at_ns) {
  const int64_t read = m.read_ns != 0 ? m.read_ns : m.ref_ns;
  return stopped_at_ns != 0 ? std::min(read, stopped_at_ns) : read;
}

// Every mapping the page showed, where the collector first read it.
void WriteClusterMappings(PlaneWriter* w, const trace::RecordedMappings& recorded, int64_t stopped_at_ns) {
  if (recorded.mappings.empty()) return;
  xspace::XLine* line = trace::GetOrCreateLine(w->plane(), trace::kRecordedMappingLine);
  // In placement order, as a line needs: reads come in order but across a
  // host clock step.
  std::vector<const trace::RecordedMapping*> order;
  for (const trace::RecordedMapping& m : recorded.mappings) order.push_back(&m);
  const auto placed = [stopped_at_ns](const trace::RecordedMapping& m) { return PlacedAt(m, stopped_at_ns); };
  std::stable_sort(order.begin(), order.end(), [&](const trace::RecordedMapping* a, const trace::RecordedMapping* b) {
    return placed(*a) < placed(*b);
  });
  for (const trace::RecordedMapping* m : order) {
    xspace::XEvent* e = w->AddEvent(line, trace::kRecordedMappingEvent, placed(*m), placed(*m));
    if (e == nullptr) continue;  // beyond the line's picosecond range: cannot occur within 106 days
    w->AddInt(e, trace::kRecordedReadStat, m->read_ns);
    for (const auto& [name, value] : trace::RecordedMappingStats(*m)) w->AddInt(e, name, value);
  }
}

}  // namespace

bool ClockPlaneSpan(const std::vector<DeviceExport>& devices, const DeviceExportOptions& options, int64_t* first_ns,
                    int64_t* last_ns) {
  bool any = false;
  for (const trace::RecordedMapping& m : options.cluster_mappings.mappings) {
    const int64_t at = PlacedAt(m, options.stopped_at_ns);
    *first_ns = any ? std::min(*first_ns, at) : at;
    *last_ns = any ? std::max(*last_ns, at) : at;
    any = true;
  }
  for (const ClockSource& s : CollectSources(devices)) {
    if (s.knots.empty()) continue;
    const int64_t lo = s.knots.front().host_ns;
    const int64_t hi = s.knots.back().host_ns;
    *first_ns = any ? std::min(*first_ns, lo) : lo;
    *last_ns = any ? std::max(*last_ns, hi) : hi;
    any = true;
  }
  return any;
}

void WriteClockPlane(const std::vector<DeviceExport>& devices, const DeviceExportOptions& options,
                     const DeviceExportStats& stats, int64_t line_base_ns, xspace::XSpace* space) {
  xspace::XPlane* plane = trace::GetOrCreatePlane(space, kGpuClockPlane);
  SetPlaneStats(plane, options, stats);
  PlaneWriter writer(plane, line_base_ns);
  for (const ClockSource& s : CollectSources(devices)) WriteSource(&writer, s);
  WriteClusterMappings(&writer, options.cluster_mappings, options.stopped_at_ns);
}

}  // namespace chronolink::collector
