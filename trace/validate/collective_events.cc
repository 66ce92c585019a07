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

// Classifies one plane's events. Per event it costs a scan of the event's
// own stats and two hash lookups: results are cached by `hlo_op` text and
// by metadata id (views into the trace, valid for the scan).
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
        hlo_op_id_(stats_.Id(vs::kHloOp)),
        category_id_(stats_.Id(vs::kChromeCategory)) {}

  void Scan(std::vector<CollectiveEvent>* out, ExtractCounts* counts) {
    for (const auto& line : plane_.lines()) {
      for (const auto& event : line.events()) {
        if (event.data_case() == xspace::XEvent::kNumOccurrences) continue;  // aggregate, no instant
        CollectiveNamePtr name = Classify(event);
        if (!name) continue;
        const auto start = EventStart(trace_.line_base_ns, line, event);
        const auto end = EventEnd(trace_.line_base_ns, line, event);
        if (!start || !end || *end < *start) {
          ++counts->bad_time;
          continue;
        }
        out->push_back(Build(event, std::move(name), *start, *end));
      }
    }
  }

 private:
  struct ByMetadata {
    CollectiveNamePtr name;                 // from the metadata's name or display name
    bool param_comms = false;               // record_param_comms: its arg names the collective
    std::optional<std::string_view> hlo_op;  // an `hlo_op` stat on the metadata itself
  };

  static CollectiveNamePtr Share(std::optional<CollectiveName> name) {
    return name ? std::make_shared<const CollectiveName>(std::move(*name)) : nullptr;
  }

  // `hlo_op` first (on the event, else on its metadata), so a kernel XLA
  // launched for an op counts as that op; then the metadata's names.
  CollectiveNamePtr Classify(const xspace::XEvent& event) {
    const ByMetadata& md = MetadataClass(event.metadata_id());
    if (hlo_op_id_) {
      const auto* stat = StatReader::FindIn(event.stats(), *hlo_op_id_);
      const auto op = stat ? stats_.View(*stat) : md.hlo_op;
      if (op) {
        auto cached = by_hlo_op_.find(*op);
        if (cached == by_hlo_op_.end()) cached = by_hlo_op_.emplace(*op, Share(ClassifyXlaOpName(*op))).first;
        if (cached->second) return cached->second;
      }
    }
    if (!md.param_comms) {
      if (md.name && md.name->dependency == Dependency::kPointToPoint) return WithDirection(event, md.name);
      return md.name;
    }
    const std::string collective = stats_.String(event, vs::kCollectiveName).value_or("");
    auto cached = by_param_comms_.find(collective);
    if (cached == by_param_comms_.end()) {
      cached = by_param_comms_.emplace(collective, Share(ClassifyParamComms(collective))).first;
    }
    return cached->second;
  }

  // Kineto copies the launching op's "Collective name" onto its NCCL kernel:
  // a SendRecv kernel that says "send" or "recv" is that half.
  CollectiveNamePtr WithDirection(const xspace::XEvent& event, const CollectiveNamePtr& name) {
    const auto collective = stats_.String(event, vs::kCollectiveName);
    const auto said = collective ? ClassifyParamComms(*collective) : std::nullopt;
    if (!said || (said->dependency != Dependency::kSend && said->dependency != Dependency::kRecv)) return name;
    const bool send = said->dependency == Dependency::kSend;
    CollectiveNamePtr& half = by_direction_[{name.get(), send}];
    if (!half) {
      CollectiveName directed = *name;
      directed.family += send ? "(send)" : "(recv)";
      directed.dependency = said->dependency;
      half = std::make_shared<const CollectiveName>(std::move(directed));
    }
    return half;
  }

  const ByMetadata& MetadataClass(int64_t metadata_id) {
    const auto cached = by_metadata_.find(metadata_id);
    if (cached != by_metadata_.end()) return cached->second;
    ByMetadata c;
    const auto metadata = plane_.event_metadata().find(metadata_id);
    if (metadata != plane_.event_metadata().end()) {
      const auto& md = metadata->second;
      c.param_comms = md.name() == kParamCommsEventName;
      if (!c.param_comms) {
        auto name = ClassifyEventName(md.name());
        c.name = Share(name ? std::move(name) : ClassifyXlaOpName(md.display_name()));
      }
      const auto* hlo_op = hlo_op_id_ ? StatReader::FindIn(md.stats(), *hlo_op_id_) : nullptr;
      if (hlo_op) c.hlo_op = stats_.View(*hlo_op);
    }
    return by_metadata_.emplace(metadata_id, std::move(c)).first->second;
  }

  bool DeviceCategory(const xspace::XEvent& event) const {
    if (!category_id_) return false;
    const auto* stat = stats_.Find(event, *category_id_);
    const auto category = stat ? stats_.View(*stat) : std::nullopt;
    return category && IsDeviceCategory(*category);
  }

  CollectiveEvent Build(const xspace::XEvent& event, CollectiveNamePtr name, TraceInstant start,
                        TraceInstant end) const {
    CollectiveEvent out;
    out.trace = trace_index_;
    out.on_device = device_plane_ || DeviceCategory(event);
    out.participant = out.on_device ? plane_.name() : std::string();
    out.covers_rendezvous = SpanCoversRendezvous(name->producer, out.on_device, trace_has_devices_);
    if (name->producer == Producer::kXla) {
      out.group = stats_.String(event, vs::kHloModule).value_or("");
      out.seq = stats_.Int(event, vs::kStepNum);
    } else {
      out.group = stats_.String(event, vs::kProcessGroupName).value_or("");
      out.seq = stats_.Int(event, vs::kSeq);
    }
    if (name->dependency == Dependency::kSend) out.peer = stats_.Int(event, vs::kDstRank);
    if (name->dependency == Dependency::kRecv) out.peer = stats_.Int(event, vs::kSrcRank);
    out.phase = name->phase;
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
  std::optional<int64_t> hlo_op_id_;
  std::optional<int64_t> category_id_;
  std::unordered_map<std::string_view, CollectiveNamePtr> by_hlo_op_;
  std::unordered_map<int64_t, ByMetadata> by_metadata_;
  std::unordered_map<std::string, CollectiveNamePtr> by_param_comms_;
  std::map<std::pair<const CollectiveName*, bool>, CollectiveNamePtr> by_direction_;  // (kernel, is send)
};

// Events are large; the join and the sort move indices, and each event is
// moved once at the end.
using Indices = std::vector<size_t>;

// Joins one stream of async halves (same participant, group and family,
// ordered by start): a -done closes the pending -start with its suffix, else
// the oldest pending one. A start left open keeps its own span.
void JoinHalves(std::vector<CollectiveEvent>& events, const Indices& stream, Indices* keep,
                ExtractCounts* counts) {
  std::deque<size_t> pending;
  for (const size_t i : stream) {
    if (events[i].phase == AsyncPhase::kStart) {
      pending.push_back(i);
      continue;
    }
    if (pending.empty()) {
      ++counts->unpaired_dones;
      continue;
    }
    auto start = std::find_if(pending.begin(), pending.end(), [&](size_t s) {
      return events[s].name->suffix == events[i].name->suffix;
    });
    if (start == pending.end()) start = pending.begin();
    CollectiveEvent& joined = events[*start];
    joined.end = std::max(joined.end, events[i].end);
    joined.phase = AsyncPhase::kWhole;
    if (!joined.seq) joined.seq = events[i].seq;
    keep->push_back(*start);
    pending.erase(start);
  }
  for (const size_t s : pending) {
    ++counts->unpaired_starts;
    events[s].phase = AsyncPhase::kWhole;
    keep->push_back(s);
  }
}

// The events that remain once halves are joined (the starts, now whole).
Indices JoinAsyncPairs(std::vector<CollectiveEvent>& events, ExtractCounts* counts) {
  Indices keep;
  std::map<std::tuple<std::string_view, std::string_view, std::string_view>, Indices> streams;
  for (size_t i = 0; i < events.size(); ++i) {
    const CollectiveEvent& e = events[i];
    if (e.phase == AsyncPhase::kWhole) {
      keep.push_back(i);
    } else {
      streams[{e.participant, e.group, e.name->family}].push_back(i);
    }
  }
  for (auto& [key, stream] : streams) {
    std::stable_sort(stream.begin(), stream.end(), [&](size_t a, size_t b) {
      return std::tie(events[a].start, events[a].end) < std::tie(events[b].start, events[b].end);
    });
    JoinHalves(events, stream, &keep, counts);
  }
  return keep;
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
  Indices keep = JoinAsyncPairs(events, counts);
  std::stable_sort(keep.begin(), keep.end(), [&](size_t a, size_t b) {
    const CollectiveEvent& x = events[a];
    const CollectiveEvent& y = events[b];
    return std::tie(x.participant, x.start, x.end) < std::tie(y.participant, y.start, y.end);
  });
  std::vector<CollectiveEvent> out;
  out.reserve(keep.size());
  for (const size_t i : keep) out.push_back(std::move(events[i]));
  return out;
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
