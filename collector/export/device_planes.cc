// Device planes, launches and the clock plane into a host's XSpace
// (device_planes.h). Three steps so that a refused request leaves the trace
// untouched: check the request, place every event on host time (no
// mutation), then choose the line base and write.
#include "collector/export/device_planes.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>

#include "collector/export/clock_plane.h"
#include "collector/export/plane_writer.h"
#include "trace/model/xplane_edit.h"

namespace chronolink::collector {
namespace {

constexpr char kHostPlaneName[] = "/host:CPU";
constexpr int64_t kXlaHostPlaneId = 49;  // the id XLA/TensorFlow give /host:CPU

std::string DevicePlaneName(uint32_t ordinal) { return "/device:GPU:" + std::to_string(ordinal); }

// One device event placed on host REALTIME.
struct PlacedEvent {
  const GpuActivity* activity = nullptr;
  int64_t start_ns = 0;  // kNodeRealtime
  int64_t end_ns = 0;    // kNodeRealtime
  int64_t bound_ns = 0;  // the conversion's (larger of start's and end's) plus the record's own
};

// One device's events, placed, and what could not be placed.
struct DevicePlacement {
  const DeviceExport* device = nullptr;
  std::vector<PlacedEvent> events;
  int64_t unconvertible = 0;
  int64_t invalid = 0;
  std::optional<int64_t> first_unconvertible_ns;  // the device's (or domain's) instant
};

// ---------------------------------------------------------------------------
// Checks

bool SpaceHasEvents(const xspace::XSpace& space) {
  for (const auto& plane : space.planes()) {
    for (const auto& line : plane.lines()) {
      if (!line.events().empty()) return true;
    }
  }
  return false;
}

bool CheckRequest(const std::vector<DeviceExport>& devices, const trace::HostTrace& trace,
                  std::string* error) {
  if (trace.clock != trace::TraceClock::kHostRealtime) {
    *error = "the trace is already on cluster time: export device planes before aligning it";
    return false;
  }
  if (!trace.line_base_known && SpaceHasEvents(*trace.space)) {
    *error =
        "the trace's line timestamps are relative to an unknown start: device planes cannot be placed in it";
    return false;
  }
  std::set<uint32_t> ordinals;
  for (const DeviceExport& d : devices) {
    const std::string plane = DevicePlaneName(d.info.ordinal);
    if ((d.map == nullptr) == (d.host_domain == nullptr)) {
      *error = plane + ": needs exactly one time conversion (a GPU clock map or a host clock domain)";
      return false;
    }
    if (!ordinals.insert(d.info.ordinal).second) {
      *error = plane + ": the device is listed twice";
      return false;
    }
    if (trace::FindPlane(*trace.space, plane) != nullptr) {
      *error = "the trace already has a " + plane +
               " plane (another profiler's device timeline); "
               "chronolink does not merge its device planes into it";
      return false;
    }
  }
  return true;
}

// ---------------------------------------------------------------------------
// Placement

ConvertedStamp Convert(const DeviceExport& d, int64_t ns) {
  return d.map != nullptr ? d.map->ToHost(ns) : d.host_domain->ToRealtime(ns);
}

DevicePlacement Place(const DeviceExport& d) {
  DevicePlacement p;
  p.device = &d;
  p.events.reserve(d.activity.size());
  for (const GpuActivity& a : d.activity) {
    if (a.device != d.info.ordinal || a.end_device_ns < a.start_device_ns) {
      ++p.invalid;
      continue;
    }
    const ConvertedStamp s = Convert(d, a.start_device_ns);
    const ConvertedStamp e = Convert(d, a.end_device_ns);
    if (!s.ok || !e.ok) {
      ++p.unconvertible;
      if (!p.first_unconvertible_ns || a.start_device_ns < *p.first_unconvertible_ns) {
        p.first_unconvertible_ns = a.start_device_ns;
      }
      continue;
    }
    // A map is non-decreasing; rounding may still tie or (never by more
    // than the bound) swap the ends of a zero-length record.
    const int64_t end = std::max(s.realtime_ns, e.realtime_ns);
    if (!PlaneWriter::Fits(s.realtime_ns, s.realtime_ns, end)) {
      ++p.invalid;
      continue;
    }
    // The record's own error on the device clock (a HIP-event region's
    // anchoring) adds to the conversion's.
    const int64_t own_error = std::max<int64_t>(0, a.device_error_ns);
    p.events.push_back({&a, s.realtime_ns, end, std::max(s.error_ns, e.error_ns) + own_error});
  }
  return p;
}

bool HasLaunch(const GpuActivity& a) {
  return a.launch_host_start_ns != 0 && a.launch_host_end_ns >= a.launch_host_start_ns;
}

// ---------------------------------------------------------------------------
// Line base

struct Span {
  bool any = false;
  int64_t first_ns = 0;
  int64_t last_ns = 0;
  void Add(int64_t lo, int64_t hi) {
    first_ns = any ? std::min(first_ns, lo) : lo;
    last_ns = any ? std::max(last_ns, hi) : hi;
    any = true;
  }
};

Span ExportSpan(const std::vector<DeviceExport>& devices, const std::vector<DevicePlacement>& placed,
                const DeviceExportOptions& options) {
  Span span;
  for (const DevicePlacement& p : placed) {
    for (const PlacedEvent& e : p.events) span.Add(e.start_ns, e.end_ns);
  }
  if (options.host_launch_events) {
    for (const DeviceExport& d : devices) {
      for (const GpuActivity& a : d.activity) {
        if (HasLaunch(a)) span.Add(a.launch_host_start_ns, a.launch_host_end_ns);
      }
    }
  }
  int64_t lo = 0;
  int64_t hi = 0;
  if (ClockPlaneSpan(devices, options, &lo, &hi)) span.Add(lo, hi);
  return span;
}

// What line timestamps will be relative to; sets the space's start and stop
// when it had neither events nor a start (a fresh space).
int64_t ChooseLineBase(const Span& span, trace::HostTrace* trace) {
  if (SpaceHasEvents(*trace->space)) return trace->line_base_ns;  // follow the space: 0 is absolute
  if (const auto start = trace::ProfileStartTime(*trace->space)) {
    trace->line_base_ns = static_cast<int64_t>(*start);
    trace->line_base_known = true;
    return trace->line_base_ns;
  }
  if (!span.any) return trace->line_base_ns;
  trace::SetProfileStartTime(trace->space, static_cast<uint64_t>(span.first_ns));
  if (!trace::ProfileStopTime(*trace->space)) {
    trace::SetProfileStopTime(trace->space, static_cast<uint64_t>(span.last_ns));
  }
  trace->line_base_ns = span.first_ns;
  trace->line_base_known = true;
  return span.first_ns;
}

// ---------------------------------------------------------------------------
// Writing

// XProf's names: a kernel by its name, copies and sets by their kind.
// The kinds in a stream's line name, as XLA writes them.
const char* StreamKindLabel(ActivityKind k) {
  switch (k) {
    case ActivityKind::kKernel:
      return "Compute";
    case ActivityKind::kMemcpyHtoD:
      return "MemcpyH2D";
    case ActivityKind::kMemcpyDtoH:
      return "MemcpyD2H";
    case ActivityKind::kMemcpyDtoD:
      return "MemcpyD2D";
    case ActivityKind::kMemset:
      return "Memset";
    case ActivityKind::kMarker:
      return "Marker";
  }
  return "Other";
}

// Kernels and markers by their own name; copies and memsets by their kind.
std::string EventName(const GpuActivity& a) {
  if (a.kind == ActivityKind::kKernel) return a.name.empty() ? "kernel" : a.name;
  if (a.kind == ActivityKind::kMarker) return a.name.empty() ? "marker" : a.name;
  return StreamKindLabel(a.kind);
}

std::string StreamLineName(uint32_t stream, const std::vector<const PlacedEvent*>& events) {
  std::set<ActivityKind> kinds;
  for (const PlacedEvent* e : events) kinds.insert(e->activity->kind);
  std::string name = "Stream #" + std::to_string(stream) + "(";
  bool first = true;
  for (ActivityKind k : kinds) {
    if (!first) name += ",";
    name += StreamKindLabel(k);
    first = false;
  }
  return name + ")";
}

void AddDeviceEventStats(PlaneWriter* w, xspace::XEvent* x, const PlacedEvent& e, uint32_t ordinal) {
  const GpuActivity& a = *e.activity;
  if (a.correlation_id != 0) w->AddUint(x, "correlation_id", a.correlation_id);
  switch (a.kind) {
    case ActivityKind::kKernel:
      if (!a.details.empty()) w->AddStr(x, "kernel_details", a.details);
      break;
    case ActivityKind::kMemcpyHtoD:
    case ActivityKind::kMemcpyDtoH:
    case ActivityKind::kMemcpyDtoD:
      // XProf reads size: and dest: from this text; the memory kinds are unknown here.
      w->AddStr(x, "memcpy_details",
                "kind:unknown size:" + std::to_string(a.bytes) + " dest:" + std::to_string(ordinal));
      break;
    case ActivityKind::kMemset:
      w->AddStr(x, "Memset_details", "size:" + std::to_string(a.bytes));
      break;
    case ActivityKind::kMarker:
      break;
  }
  w->AddInt(x, kGpuBoundStat, e.bound_ns);
}

bool ByTime(const PlacedEvent* a, const PlacedEvent* b) {
  return a->start_ns != b->start_ns ? a->start_ns < b->start_ns : a->end_ns < b->end_ns;
}

// XProf takes a device plane's id as its process id, so the id must be the
// ordinal: a plane of another kind that holds it (the `Task Environment`
// plane of a fresh space takes id 0) moves to a free id.
void FreePlaneId(int64_t id, xspace::XSpace* space) {
  for (auto& plane : *space->mutable_planes()) {
    if (plane.id() == id) plane.set_id(trace::NextPlaneId(*space));
  }
}

void WriteDevicePlane(const DevicePlacement& p, int64_t line_base_ns, xspace::XSpace* space,
                      DeviceExportStats* stats, double* bound_sum) {
  const uint32_t ordinal = p.device->info.ordinal;
  FreePlaneId(ordinal, space);
  auto* plane = space->add_planes();
  plane->set_id(ordinal);  // XProf's process id for the device
  plane->set_name(DevicePlaneName(ordinal));
  PlaneWriter w(plane, line_base_ns);
  std::map<uint32_t, std::vector<const PlacedEvent*>> streams;
  for (const PlacedEvent& e : p.events) streams[e.activity->stream].push_back(&e);
  for (auto& [stream, events] : streams) {
    std::sort(events.begin(), events.end(), ByTime);
    auto* line = plane->add_lines();
    line->set_id(stream);
    line->set_display_id(stream);
    line->set_name(StreamLineName(stream, events));
    for (const PlacedEvent* e : events) {
      xspace::XEvent* x = w.AddEvent(line, EventName(*e->activity), e->start_ns, e->end_ns);
      if (x == nullptr) {  // beyond the line's picosecond range (a stream spanning > 106 days)
        ++stats->events_invalid;
        continue;
      }
      AddDeviceEventStats(&w, x, *e, ordinal);
      ++stats->events_written;
      stats->max_bound_ns = std::max(stats->max_bound_ns, e->bound_ns);
      *bound_sum += static_cast<double>(e->bound_ns);
    }
  }
}

xspace::XPlane* HostPlane(xspace::XSpace* space) {
  if (auto* plane = trace::FindMutablePlane(space, kHostPlaneName)) return plane;
  const bool xla_id_free = std::none_of(space->planes().begin(), space->planes().end(),
                                        [](const xspace::XPlane& p) { return p.id() == kXlaHostPlaneId; });
  const int64_t id = xla_id_free ? kXlaHostPlaneId : trace::NextPlaneId(*space);
  auto* plane = space->add_planes();
  plane->set_id(id);
  plane->set_name(kHostPlaneName);
  return plane;
}

// Host-side launches, one line per launching thread, in time order.
void WriteLaunches(const std::vector<DeviceExport>& devices, int64_t line_base_ns, xspace::XSpace* space,
                   DeviceExportStats* stats) {
  std::map<uint32_t, std::vector<const GpuActivity*>> by_thread;
  for (const DeviceExport& d : devices) {
    for (const GpuActivity& a : d.activity) {
      if (HasLaunch(a) && a.device == d.info.ordinal) by_thread[a.launch_thread].push_back(&a);
    }
  }
  if (by_thread.empty()) return;
  PlaneWriter w(HostPlane(space), line_base_ns);
  for (auto& [thread, launches] : by_thread) {
    std::sort(launches.begin(), launches.end(), [](const GpuActivity* a, const GpuActivity* b) {
      return a->launch_host_start_ns < b->launch_host_start_ns;
    });
    xspace::XLine* line =
        trace::GetOrCreateLine(w.plane(), "GPU launches (thread " + std::to_string(thread) + ")");
    line->set_display_id(thread);
    for (const GpuActivity* a : launches) {
      xspace::XEvent* x =
          w.AddEvent(line, "Launch " + EventName(*a), a->launch_host_start_ns, a->launch_host_end_ns);
      if (x == nullptr) continue;
      if (a->correlation_id != 0) w.AddUint(x, "correlation_id", a->correlation_id);
      w.AddUint(x, "device_id", a->device);
      ++stats->launch_events_written;
    }
  }
}

// One summary line per device that lost events.
void AddWarnings(const std::vector<DevicePlacement>& placed, xspace::XSpace* space) {
  for (const DevicePlacement& p : placed) {
    if (p.unconvertible == 0 && p.invalid == 0) continue;
    const DeviceExport& d = *p.device;
    std::string w = "chronolink collector: " + DevicePlaneName(d.info.ordinal) + ": " +
                    std::to_string(p.unconvertible + p.invalid) + " of " + std::to_string(d.activity.size()) +
                    " events not written";
    if (p.unconvertible > 0) {
      const std::string domain = d.map != nullptr ? "device" : std::string(d.host_domain->domain_name());
      w += "; " + std::to_string(p.unconvertible) +
           " not convertible to host time (outside the sampled span or across a clock step; first at " +
           domain + " ns " + std::to_string(*p.first_unconvertible_ns) + ")";
    }
    if (p.invalid > 0) {
      w += "; " + std::to_string(p.invalid) +
           " invalid (end before start, another device's record, or a span "
           "too long for the line)";
    }
    space->add_warnings(w);
  }
}

}  // namespace

bool AppendDevicePlanes(const std::vector<DeviceExport>& devices, const DeviceExportOptions& options,
                        trace::HostTrace* trace, DeviceExportStats* stats, std::string* error) {
  *stats = {};
  if (!CheckRequest(devices, *trace, error)) return false;
  std::vector<DevicePlacement> placed;
  placed.reserve(devices.size());
  for (const DeviceExport& d : devices) placed.push_back(Place(d));

  const Span span = ExportSpan(devices, placed, options);
  const int64_t line_base_ns = ChooseLineBase(span, trace);
  double bound_sum = 0;
  for (const DevicePlacement& p : placed) {
    stats->events_unconvertible += p.unconvertible;
    stats->events_invalid += p.invalid;
    WriteDevicePlane(p, line_base_ns, trace->space, stats, &bound_sum);
  }
  if (stats->events_written > 0)
    stats->mean_bound_ns = bound_sum / static_cast<double>(stats->events_written);
  if (options.host_launch_events) WriteLaunches(devices, line_base_ns, trace->space, stats);
  WriteClockPlane(devices, options, *stats, line_base_ns, trace->space);
  AddWarnings(placed, trace->space);
  return true;
}

}  // namespace chronolink::collector
