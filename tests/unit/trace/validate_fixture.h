// Builds HostTraces by hand with the generated proto API for the validate
// tests: planes, lines, events with named stats (str, int, ref), the way
// the XSpace and Chrome importers fill them. Test-only; not thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>

#include "proto/xplane.pb.h"
#include "trace/model/host_trace.h"

namespace chronolink::trace::testing {

// One plane being filled: interns event and stat metadata by name.
class PlaneBuilder {
 public:
  PlaneBuilder(xspace::XPlane* plane) : plane_(plane) {}

  xspace::XLine* Line(int64_t id, const std::string& name, int64_t timestamp_ns = 0) {
    auto* line = plane_->add_lines();
    line->set_id(id);
    line->set_name(name);
    line->set_timestamp_ns(timestamp_ns);
    return line;
  }

  // An event [start_ns, end_ns) relative to the line's timestamp.
  xspace::XEvent* Event(xspace::XLine* line, const std::string& name, int64_t start_ns, int64_t end_ns) {
    auto* e = line->add_events();
    e->set_metadata_id(EventMetadata(name));
    e->set_offset_ps(start_ns * 1000);
    e->set_duration_ps((end_ns - start_ns) * 1000);
    return e;
  }

  void Str(xspace::XEvent* e, const std::string& stat, const std::string& value) {
    auto* s = e->add_stats();
    s->set_metadata_id(StatMetadata(stat));
    s->set_str_value(value);
  }
  void Int(xspace::XEvent* e, const std::string& stat, int64_t value) {
    auto* s = e->add_stats();
    s->set_metadata_id(StatMetadata(stat));
    s->set_int64_value(value);
  }
  // XProf interns repeated strings: the value is another stat metadata's name.
  void Ref(xspace::XEvent* e, const std::string& stat, const std::string& value) {
    auto* s = e->add_stats();
    s->set_metadata_id(StatMetadata(stat));
    s->set_ref_value(static_cast<uint64_t>(StatMetadata(value)));
  }
  void PlaneStr(const std::string& stat, const std::string& value) {
    auto* s = plane_->add_stats();
    s->set_metadata_id(StatMetadata(stat));
    s->set_str_value(value);
  }
  void PlaneInt(const std::string& stat, int64_t value) {
    auto* s = plane_->add_stats();
    s->set_metadata_id(StatMetadata(stat));
    s->set_int64_value(value);
  }

  int64_t EventMetadata(const std::string& name) { return Intern(name, events_, true); }
  int64_t StatMetadata(const std::string& name) { return Intern(name, stats_, false); }

 private:
  int64_t Intern(const std::string& name, std::map<std::string, int64_t>& ids, bool event) {
    const auto found = ids.find(name);
    if (found != ids.end()) return found->second;
    const int64_t id = static_cast<int64_t>(events_.size() + stats_.size()) + 1;
    ids.emplace(name, id);
    if (event) {
      auto& md = (*plane_->mutable_event_metadata())[id];
      md.set_id(id);
      md.set_name(name);
    } else {
      auto& md = (*plane_->mutable_stat_metadata())[id];
      md.set_id(id);
      md.set_name(name);
    }
    return id;
  }

  xspace::XPlane* plane_;
  std::map<std::string, int64_t> events_;
  std::map<std::string, int64_t> stats_;
};

inline HostTrace MakeHost(const std::string& host, int64_t line_base_ns = 0) {
  HostTrace t;
  t.host = host;
  t.line_base_ns = line_base_ns;
  return t;
}

inline PlaneBuilder AddPlane(HostTrace& t, int64_t id, const std::string& name) {
  auto* plane = t.space->add_planes();
  plane->set_id(id);
  plane->set_name(name);
  return PlaneBuilder(plane);
}

// A legacy PyTorch profiler trace of a gloo all_reduce loop as the Chrome
// importer fills the model: plane "CPU functions", one line per tid, times
// relative to the profiler start (line_base_ns = true start + the host's
// clock offset). Iteration k at T = k * 10 ms, host h:
//   c10d::allreduce_ on tid 1: [T - 100 us + 30 us * h, + 20 us]  (returns a Work: enqueue only)
//   gloo:all_reduce on a worker tid (2 or 3, alternating as gloo's do):
//       [T + 10 us * h, T + 1000 us + 5 us * h]
// so truly every gloo:all_reduce ends after every host's started.
inline constexpr int64_t kGlooTrueStartNs = 1'700'000'000'000'000'000;

inline HostTrace LegacyGlooHost(const std::string& name, int h, int64_t clock_offset_ns, int iterations) {
  HostTrace t = MakeHost(name, kGlooTrueStartNs + clock_offset_ns);
  t.source_format = TraceFormat::kChromeJson;
  PlaneBuilder plane = AddPlane(t, 1, "CPU functions");
  auto* main = plane.Line(1, "1");
  xspace::XLine* workers[2] = {plane.Line(2, "2"), plane.Line(3, "3")};
  for (int k = 0; k < iterations; ++k) {
    const int64_t at = int64_t{k} * 10'000'000;
    plane.Event(main, "c10d::allreduce_", at - 100'000 + 30'000 * h, at - 80'000 + 30'000 * h);
    plane.Event(workers[(k + h) % 2], "gloo:all_reduce", at + 10'000 * h, at + 1'000'000 + 5'000 * h);
  }
  return t;
}

}  // namespace chronolink::trace::testing
