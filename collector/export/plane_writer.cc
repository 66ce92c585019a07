// Event writing for the collector's planes (plane_writer.h).
#include "collector/export/plane_writer.h"

#include "trace/model/xplane_edit.h"

namespace chronolink::collector {

PlaneWriter::PlaneWriter(xspace::XPlane* plane, int64_t line_base_ns)
    : plane_(plane), line_base_ns_(line_base_ns) {}

int64_t PlaneWriter::StatId(std::string_view name) {
  auto [it, inserted] = stat_ids_.try_emplace(std::string(name), 0);
  if (inserted) it->second = trace::GetOrCreateStatMetadata(plane_, name)->id();
  return it->second;
}

int64_t PlaneWriter::EventId(std::string_view name) {
  auto [it, inserted] = event_ids_.try_emplace(std::string(name), 0);
  if (inserted) it->second = trace::GetOrCreateEventMetadata(plane_, name)->id();
  return it->second;
}

bool PlaneWriter::Fits(int64_t line_first_ns, int64_t start_ns, int64_t end_ns) {
  if (end_ns < start_ns || start_ns < line_first_ns) return false;
  // Differences of two int64 instants: computed wide so neither overflows.
  const __int128 offset = static_cast<__int128>(start_ns) - line_first_ns;
  const __int128 duration = static_cast<__int128>(end_ns) - start_ns;
  return offset <= kMaxLineSpanNs && duration <= kMaxLineSpanNs;
}

xspace::XEvent* PlaneWriter::AddEvent(xspace::XLine* line, std::string_view name, int64_t start_ns,
                                      int64_t end_ns) {
  int64_t line_first_ns = start_ns;
  if (!line->events().empty()) {
    // The line's first event start, recovered from its timestamp.
    line_first_ns = line->timestamp_ns() + line_base_ns_;
  }
  if (!Fits(line_first_ns, start_ns, end_ns)) return nullptr;
  if (line->events().empty()) line->set_timestamp_ns(start_ns - line_base_ns_);
  auto* event = line->add_events();
  event->set_metadata_id(EventId(name));
  event->set_offset_ps((start_ns - line_first_ns) * 1000);
  event->set_duration_ps((end_ns - start_ns) * 1000);
  return event;
}

void PlaneWriter::AddUint(xspace::XEvent* event, std::string_view stat, uint64_t value) {
  auto* s = event->add_stats();
  s->set_metadata_id(StatId(stat));
  s->set_uint64_value(value);
}

void PlaneWriter::AddInt(xspace::XEvent* event, std::string_view stat, int64_t value) {
  auto* s = event->add_stats();
  s->set_metadata_id(StatId(stat));
  s->set_int64_value(value);
}

void PlaneWriter::AddStr(xspace::XEvent* event, std::string_view stat, std::string_view value) {
  auto* s = event->add_stats();
  s->set_metadata_id(StatId(stat));
  s->set_str_value(std::string(value));
}

}  // namespace chronolink::collector
