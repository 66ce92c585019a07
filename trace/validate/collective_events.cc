#include "trace/validate/collective_events.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <deque>
#include <map>
#include <tuple>
#include <unordered_map>

#include "trace/validate/stat_reader.h"

namespace chronolink::trace {
namespace {

namespace vs = validate_stats;

// Kineto categories of events that ran on a device, whatever plane the
// Chrome importer put them on.
bool IsDeviceCategory(std::string_view category) {
  return category == "kernel" || category == "gpu_user_annotation";
}

bool TraceHasDevicePlanes(const HostTrace& trace) {
  return std::any_of(trace.space->planes().begin(), trace.space->planes().end(),
                     [](const xspace::XPlane& p) { return IsDevicePlaneName(p.name()); });
}

// Classifies one plane's events; name-only results are cached per metadata id.
class PlaneScanner {
 public:
  PlaneScanner(const HostTrace& trace, size_t trace_index, const xspace::XPlane& plane,
               bool trace_has_devices)
      : trace_(trace),
        trace_index_(trace_index),
        plane_(plane),
        stats_(plane),
        device_plane_(IsDevicePlaneName(plane.name())),
        trace_has_devices_(trace_has_devices),
        has_hlo_op_(stats_.Declares(vs::kHloOp)),
        has_category_(stats_.Declares(vs::kChromeCategory)) {}

  void Scan(std::vector<CollectiveEvent>* out, ExtractCounts* counts) {
    for (const auto& line : plane_.lines()) {
      for (const auto& event : line.events()) {
        if (event.data_case() == xspace::XEvent::kNumOccurrences) continue;  // aggregate, no instant
        auto name = Classify(event);
        if (!name) continue;
        const auto start = EventStart(trace_.line_base_ns, line, event);
        const auto end = EventEnd(trace_.line_base_ns, line, event);
        if (!start || !end || *end < *start) {
          ++counts->bad_time;
          continue;
        }
        out->push_back(Build(event, std::move(*name), *start, *end));
      }
    }
  }

 private:
  std::optional<CollectiveName> Classify(const xspace::XEvent& event) {
    if (has_hlo_op_) {
      if (const auto op = stats_.String(event, vs::kHloOp)) {
        if (auto xla = ClassifyXlaOpName(*op)) return xla;
      }
    }
    const auto metadata = plane_.event_metadata().find(event.metadata_id());
    if (metadata == plane_.event_metadata().end()) return std::nullopt;
    if (metadata->second.name() == kParamCommsEventName) {
      return ClassifyParamComms(stats_.String(event, vs::kCollectiveName).value_or(""));
    }
    auto cached = by_metadata_.find(event.metadata_id());
    if (cached == by_metadata_.end()) {
      auto name = ClassifyEventName(metadata->second.name());
      if (!name) name = ClassifyXlaOpName(metadata->second.display_name());
      cached = by_metadata_.emplace(event.metadata_id(), std::move(name)).first;
    }
    return cached->second;
  }

  CollectiveEvent Build(const xspace::XEvent& event, CollectiveName name, TraceInstant start,
                        TraceInstant end) const {
    CollectiveEvent out;
    out.trace = trace_index_;
    out.on_device = device_plane_ ||
                    (has_category_ && IsDeviceCategory(stats_.String(event, vs::kChromeCategory).value_or("")));
    out.participant = out.on_device ? plane_.name() : std::string();
    out.covers_rendezvous = SpanCoversRendezvous(name.producer, out.on_device, trace_has_devices_);
    if (name.producer == Producer::kXla) {
      out.group = stats_.String(event, vs::kHloModule).value_or("");
      out.seq = stats_.Int(event, vs::kStepNum);
    } else {
      out.group = stats_.String(event, vs::kProcessGroupName).value_or("");
      out.seq = stats_.Int(event, vs::kSeq);
    }
    if (name.dependency == Dependency::kSend) out.peer = stats_.Int(event, vs::kDstRank);
    if (name.dependency == Dependency::kRecv) out.peer = stats_.Int(event, vs::kSrcRank);
    out.name = std::move(name);
    out.start = start;
    out.end = end;
    return out;
  }

  const HostTrace& trace_;
  size_t trace_index_;
  const xspace::XPlane& plane_;
  StatReader stats_;
  bool device_plane_;
  bool trace_has_devices_;
  bool has_hlo_op_;
  bool has_category_;
  std::unordered_map<int64_t, std::optional<CollectiveName>> by_metadata_;
};

bool ByParticipantThenStart(const CollectiveEvent& a, const CollectiveEvent& b) {
  return std::tie(a.participant, a.start, a.end) < std::tie(b.participant, b.start, b.end);
}

// Joins one stream of async halves (same participant, group and family,
// ordered by start): a -done closes the pending -start with its suffix, else
// the oldest pending one. A start left open keeps its own span.
void JoinHalves(std::vector<CollectiveEvent> halves, std::vector<CollectiveEvent>* out,
                ExtractCounts* counts) {
  std::deque<CollectiveEvent> pending;
  for (auto& half : halves) {
    if (half.name.phase == AsyncPhase::kStart) {
      pending.push_back(std::move(half));
      continue;
    }
    if (pending.empty()) {
      ++counts->unpaired_dones;
      continue;
    }
    auto start = std::find_if(pending.begin(), pending.end(), [&](const CollectiveEvent& s) {
      return s.name.suffix == half.name.suffix;
    });
    if (start == pending.end()) start = pending.begin();
    CollectiveEvent joined = std::move(*start);
    pending.erase(start);
    joined.end = std::max(joined.end, half.end);
    joined.name.phase = AsyncPhase::kWhole;
    if (!joined.seq) joined.seq = half.seq;
    out->push_back(std::move(joined));
  }
  for (auto& start : pending) {
    ++counts->unpaired_starts;
    start.name.phase = AsyncPhase::kWhole;
    out->push_back(std::move(start));
  }
}

std::vector<CollectiveEvent> JoinAsyncPairs(std::vector<CollectiveEvent> events, ExtractCounts* counts) {
  std::vector<CollectiveEvent> out;
  std::map<std::tuple<std::string, std::string, std::string>, std::vector<CollectiveEvent>> streams;
  for (auto& e : events) {
    if (e.name.phase == AsyncPhase::kWhole) {
      out.push_back(std::move(e));
    } else {
      streams[{e.participant, e.group, e.name.family}].push_back(std::move(e));
    }
  }
  for (auto& [key, halves] : streams) {
    std::stable_sort(halves.begin(), halves.end(), ByParticipantThenStart);
    JoinHalves(std::move(halves), &out, counts);
  }
  return out;
}

std::optional<int64_t> RankFromJson(const std::string& text) {
  const auto json = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!json.is_object()) return std::nullopt;
  const auto rank = json.find("rank");
  if (rank == json.end() || !rank->is_number_integer()) return std::nullopt;
  return rank->get<int64_t>();
}

}  // namespace

bool IsDevicePlaneName(std::string_view name) {
  return name.starts_with("/device:") || name.starts_with("GPU ");
}

std::vector<CollectiveEvent> ExtractCollectives(const HostTrace& trace, size_t trace_index,
                                                ExtractCounts* counts) {
  const bool has_devices = TraceHasDevicePlanes(trace);
  std::vector<CollectiveEvent> events;
  for (const auto& plane : trace.space->planes()) {
    PlaneScanner(trace, trace_index, plane, has_devices).Scan(&events, counts);
  }
  events = JoinAsyncPairs(std::move(events), counts);
  std::stable_sort(events.begin(), events.end(), ByParticipantThenStart);
  return events;
}

std::optional<int64_t> TraceRank(const HostTrace& trace) {
  for (const auto& plane : trace.space->planes()) {
    const StatReader stats(plane);
    if (const auto rank = stats.PlaneInt("rank")) return rank;
    if (const auto info = stats.PlaneString("distributedInfo")) {
      if (const auto rank = RankFromJson(*info)) return rank;
    }
  }
  return std::nullopt;
}

}  // namespace chronolink::trace
