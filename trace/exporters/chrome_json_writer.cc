#include "trace/exporters/chrome_json_writer.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <map>
#include <set>

#include "common/atomic_output_file.h"
#include "trace/exporters/chrome_event_writer.h"
#include "trace/exporters/micros_grid.h"
#include "trace/importers/chrome_json/chrome_schema.h"
#include "trace/importers/chrome_json/json_text.h"
#include "common/quoted_text.h"
#include "trace/model/trace_time.h"
#include "trace/model/xplane_edit.h"

namespace chronolink::trace {
namespace {

constexpr std::string_view kHostsKey = "chronolinkHosts";
constexpr std::string_view kHostMetadataPlane = "/host:metadata";
constexpr int64_t kNsPerSecond = 1'000'000'000;

using Flush = std::function<bool(std::string*)>;

const xspace::XStat* PlaneStat(const xspace::XPlane& plane, std::string_view name,
                               chrome::StatKind kind) {
  for (const auto& s : plane.stats()) {
    const auto it = plane.stat_metadata().find(s.metadata_id());
    if (it != plane.stat_metadata().end() && it->second.name() == name &&
        chrome::KindOfDescription(it->second.description()) == kind) {
      return &s;
    }
  }
  return nullptr;
}

std::string_view StatName(const xspace::XPlane& plane, const xspace::XStat& s) {
  const auto it = plane.stat_metadata().find(s.metadata_id());
  return it == plane.stat_metadata().end() ? std::string_view("?") : std::string_view(it->second.name());
}

bool IsReservedTopLevelStat(const xspace::XPlane& plane, const xspace::XStat& s) {
  const auto it = plane.stat_metadata().find(s.metadata_id());
  return it != plane.stat_metadata().end() &&
         chrome::IsField(chrome::KindOfDescription(it->second.description()));
}

std::optional<int64_t> EventMetadataIdNamed(const xspace::XPlane& plane, std::string_view name) {
  for (const auto& [id, md] : plane.event_metadata()) {
    if (md.name() == name) return id;
  }
  return std::nullopt;
}

// Original JSON tids of lines whose tid was not an int64 (chrome.tids).
std::map<int64_t, std::optional<std::string>> StringTids(const xspace::XPlane& plane) {
  std::map<int64_t, std::optional<std::string>> tids;
  const auto* stat = PlaneStat(plane, chrome::kTids, chrome::StatKind::kFieldJson);
  if (stat == nullptr) return tids;
  const auto doc = nlohmann::json::parse(stat->str_value(), nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object()) return tids;
  for (const auto& [key, value] : doc.items()) {
    char* end = nullptr;
    const long long id = std::strtoll(key.c_str(), &end, 10);
    if (end == key.c_str() || *end != '\0') continue;
    tids[id] = value.is_null() ? std::nullopt : std::optional<std::string>(value.dump());
  }
  return tids;
}

// Calls `visit(line_base_ns, line, event)` for every event with an instant.
template <typename Visit>
void ForEachTimedEvent(const std::vector<const HostTrace*>& hosts, Visit visit) {
  for (const HostTrace* h : hosts) {
    for (const auto& plane : h->space->planes()) {
      for (const auto& line : plane.lines()) {
        for (const auto& event : line.events()) {
          if (event.data_case() != xspace::XEvent::kNumOccurrences) visit(h->line_base_ns, line, event);
        }
      }
    }
  }
}

// The earliest event's instant floored to a whole second (0 without events):
// an origin for traces that name none.
int64_t EarliestEventSecond(const std::vector<const HostTrace*>& hosts) {
  std::optional<int64_t> earliest;
  ForEachTimedEvent(hosts, [&](int64_t base, const xspace::XLine& line, const xspace::XEvent& event) {
    const auto t = EventStart(base, line, event);
    if (t && (!earliest || t->ns < *earliest)) earliest = t->ns;
  });
  const int64_t e = earliest.value_or(0);
  return e / kNsPerSecond * kNsPerSecond - (e % kNsPerSecond < 0 ? kNsPerSecond : 0);
}

// The finest time grid on which every event's start and end, relative to
// `origin`, is a double exactly (micros_grid.h).
int TimeGridFor(const std::vector<const HostTrace*>& hosts, int64_t origin) {
  __int128 max_abs = 0;
  ForEachTimedEvent(hosts, [&](int64_t base, const xspace::XLine& line, const xspace::XEvent& event) {
    const __int128 start = (static_cast<__int128>(base) - origin + line.timestamp_ns()) * 1000 + event.offset_ps();
    for (const __int128 t : {start, start + event.duration_ps()}) max_abs = std::max(max_abs, t < 0 ? -t : t);
  });
  return GridExponentFor(max_abs);
}

bool XProfDraws(const xspace::XPlane& plane) {
  if (plane.name() == kTaskEnvPlaneName || plane.name() == kHostMetadataPlane ||
      plane.name() == chrome::kTopLevelPlane) {
    return false;
  }
  for (const auto& line : plane.lines()) {
    if (line.events_size() > 0) return true;
  }
  return false;
}

// Streams one document: events are appended to `out` and handed to `flush`
// as it fills.
class DocumentWriter {
 public:
  DocumentWriter(const std::vector<const HostTrace*>& hosts, const ChromeWriteOptions& options,
                 std::string* out, Flush flush)
      : hosts_(hosts), options_(options), out_(out), flush_(std::move(flush)) {}

  bool Write(std::string* error) {
    if (hosts_.empty()) {
      *error = "no traces to write";
      return false;
    }
    if (!options_.top_level_extra.is_object()) {
      *error = "internal: top_level_extra must be a JSON object";
      return false;
    }
    const bool faithful = hosts_.size() == 1 && hosts_[0]->source_format == TraceFormat::kChromeJson;
    return faithful ? WriteFaithful(*hosts_[0], error) : WriteExport(error);
  }

 private:
  // --- faithful: one Chrome JSON host in its own flavour ---
  bool WriteFaithful(const HostTrace& host, std::string* error) {
    const xspace::XPlane* top = chrome::FindTopLevelPlane(*host.space);
    bool object_form = true;
    bool had_base = false;
    if (top != nullptr) {
      const auto* form = PlaneStat(*top, chrome::kForm, chrome::StatKind::kField);
      object_form = form == nullptr || form->str_value() != "array";
      had_base = PlaneStat(*top, chrome::kHadBaseTime, chrome::StatKind::kField) != nullptr;
    }
    // ts relative to a base written as baseTimeNanoseconds (Kineto's
    // form), so that a double holds them exactly: the document's own (the
    // model's current, after align the common origin), else a known start
    // (a legacy trace given its origin), else, for absolute times, the
    // earliest event's second. A trace relative to an unknown start stays
    // as read: there is no base to name.
    std::optional<int64_t> base;
    if (had_base || (host.line_base_known && host.line_base_ns != 0)) {
      base = host.line_base_ns;
    } else if (host.line_base_known) {
      base = EarliestEventSecond(hosts_);
    }
    if (!options_.top_level_extra.empty() || base) object_form = true;
    const int64_t origin = base.value_or(host.line_base_ns);
    grid_exponent_ = TimeGridFor(hosts_, origin);
    if (object_form) {
      out_->append("{");
      if (top != nullptr) AppendTopLevelStats(*top);
      if (base) AppendMember(chrome::kBaseTimeKey, std::to_string(*base));
      AppendExtra();
      out_->append("\"traceEvents\":[");
    } else {
      out_->append("[");
    }
    for (const auto& plane : host.space->planes()) {
      if (&plane == top) continue;
      if (!WriteFaithfulPlane(host, plane, origin, error)) return false;
    }
    out_->append(object_form ? "\n]}\n" : "\n]\n");
    return flush_(error);
  }

  bool WriteFaithfulPlane(const HostTrace& host, const xspace::XPlane& plane, int64_t origin,
                          std::string* error) {
    ChromeEventPlace place;
    place.plane = &plane;
    place.line_base_ns = host.line_base_ns;
    place.origin_ns = origin;
    place.grid_exponent = grid_exponent_;
    place.process_name = &plane.name();
    const auto* pid = PlaneStat(plane, chrome::kPid, chrome::StatKind::kFieldJson);
    place.pid_text = pid != nullptr ? pid->str_value() : std::to_string(plane.id());
    if (!plane.name().empty() && !EventMetadataIdNamed(plane, chrome::kProcessName)) {
      AppendGeneratedMetadata(place.pid_text, std::nullopt, chrome::kProcessName, "name",
                              QuotedString(plane.name()));
    }
    const auto tids = StringTids(plane);
    for (const auto& line : plane.lines()) {
      const auto it = tids.find(line.id());
      place.tid_text = it == tids.end() ? std::optional<std::string>(std::to_string(line.id())) : it->second;
      if (!WriteLine(plane, line, &place, /*skip_process_metadata=*/false, error)) return false;
    }
    return true;
  }

  // --- export: XSpace hosts and several hosts, one process per drawn plane ---
  bool WriteExport(std::string* error) {
    int64_t origin = 0;
    if (!ChooseOrigin(&origin, error)) return false;
    grid_exponent_ = TimeGridFor(hosts_, origin);
    out_->append("{");
    AppendMember(chrome::kBaseTimeKey, std::to_string(origin));
    AppendHostsMetadata();
    AppendExtra();
    out_->append("\"traceEvents\":[");
    int64_t next_pid = 1;
    for (size_t h = 0; h < hosts_.size(); ++h) {
      const HostTrace& host = *hosts_[h];
      for (const auto& plane : host.space->planes()) {
        if (!Drawn(host, plane)) continue;
        if (!WriteExportPlane(host, HostLabel(h), plane, origin, next_pid++, error)) return false;
      }
    }
    out_->append("\n]}\n");
    return flush_(error);
  }

  static bool Drawn(const HostTrace& host, const xspace::XPlane& plane) {
    if (host.source_format == TraceFormat::kChromeJson) {
      return &plane != chrome::FindTopLevelPlane(*host.space);
    }
    return XProfDraws(plane);
  }

  std::string HostLabel(size_t h) const {
    return hosts_[h]->host.empty() ? "host" + std::to_string(h) : hosts_[h]->host;
  }

  bool WriteExportPlane(const HostTrace& host, const std::string& host_label,
                        const xspace::XPlane& plane, int64_t origin, int64_t pid, std::string* error) {
    const bool json_origin = host.source_format == TraceFormat::kChromeJson;
    ChromeEventPlace place;
    place.plane = &plane;
    place.line_base_ns = host.line_base_ns;
    place.origin_ns = origin;
    place.grid_exponent = grid_exponent_;
    place.pid_text = std::to_string(pid);
    std::string label = plane.name();
    if (label.empty()) {
      const auto* original = PlaneStat(plane, chrome::kPid, chrome::StatKind::kFieldJson);
      label = "pid " + (original != nullptr ? original->str_value() : std::to_string(plane.id()));
    }
    const std::string process_name = host_label + ": " + label;
    place.process_name = &process_name;
    AppendGeneratedMetadata(place.pid_text, std::nullopt, chrome::kProcessName, "name",
                            QuotedString(process_name));
    AppendGeneratedMetadata(place.pid_text, std::nullopt, chrome::kProcessLabels, "labels",
                            QuotedString(host_label));
    AppendGeneratedMetadata(place.pid_text, std::nullopt, chrome::kProcessSortIndex, "sort_index",
                            std::to_string(pid));
    const auto tids = StringTids(plane);
    std::set<int64_t> used_tids;
    for (const auto& line : plane.lines()) used_tids.insert(line.id());
    std::set<int64_t> written;
    int64_t next_tid = used_tids.empty() ? 0 : *used_tids.rbegin() + 1;
    for (const auto& line : plane.lines()) {
      if (!json_origin && line.events_size() == 0) continue;  // XProf skips empty lines too
      int64_t tid = line.id();
      if (!written.insert(tid).second) tid = next_tid++;  // two lines with one id: keep both
      const auto it = tids.find(line.id());
      place.tid_text = it == tids.end() ? std::optional<std::string>(std::to_string(tid)) : it->second;
      if (!WriteLine(plane, line, &place, /*skip_process_metadata=*/true, error)) return false;
    }
    return true;
  }

  bool WriteLine(const xspace::XPlane& plane, const xspace::XLine& line, ChromeEventPlace* place,
                 bool skip_process_metadata, std::string* error) {
    const std::string& thread_name = line.display_name().empty() ? line.name() : line.display_name();
    place->thread_name = &thread_name;
    place->counters_line = line.name() == chrome::kCountersLine;
    if (place->tid_text && !thread_name.empty() && !place->counters_line &&
        !HasThreadNameEvent(plane, line)) {
      AppendGeneratedMetadata(place->pid_text, place->tid_text, chrome::kThreadName, "name",
                              QuotedString(thread_name));
    }
    for (const auto& event : line.events()) {
      if (event.data_case() == xspace::XEvent::kNumOccurrences && IsAggregate(plane, event)) {
        continue;  // an XSpace aggregate (no instant): not a timeline event
      }
      if (skip_process_metadata && IsProcessMetadata(plane, event, place->counters_line)) continue;
      BeginEvent();
      if (!writer_.Write(*place, line, event, out_, error)) {
        *error = "plane " + QuotedText(plane.name()) + ", line " + QuotedText(line.name()) + ": " + *error;
        return false;
      }
      if (out_->size() >= (1 << 20) && !flush_(error)) return false;
    }
    return true;
  }

  // Untimed events the Chrome reader made (metadata, no ts) carry a
  // chrome.ph or chrome.keys stat; anything else untimed is an XSpace aggregate.
  static bool IsAggregate(const xspace::XPlane& plane, const xspace::XEvent& event) {
    for (const auto& s : event.stats()) {
      const auto name = StatName(plane, s);
      if (name == chrome::kPh || name == chrome::kKeys) return false;
    }
    return true;
  }

  static bool IsProcessMetadata(const xspace::XPlane& plane, const xspace::XEvent& event,
                                bool counters_line) {
    if (ChromeEventWriter::PhOf(plane, event, counters_line) != "M") return false;
    const auto name = ChromeEventWriter::NameOf(plane, event);
    return name == chrome::kProcessName || name == chrome::kProcessLabels ||
           name == chrome::kProcessSortIndex;
  }

  static bool HasThreadNameEvent(const xspace::XPlane& plane, const xspace::XLine& line) {
    const auto id = EventMetadataIdNamed(plane, chrome::kThreadName);
    if (!id) return false;
    return std::any_of(line.events().begin(), line.events().end(),
                       [&](const xspace::XEvent& e) { return e.metadata_id() == *id; });
  }

  // The earliest non-zero line base, else the earliest event floored to a
  // second; every host must know its base.
  bool ChooseOrigin(int64_t* origin, std::string* error) const {
    for (const HostTrace* h : hosts_) {
      if (!h->line_base_known) {
        *error = "host " + ShownName(h->host) + " (" + h->source.string() +
                 "): its timestamps are relative to an unknown start, so it cannot share a "
                 "timeline with others; give its start (--origin HOST=NS)";
        return false;
      }
    }
    if (options_.origin_ns) {
      *origin = *options_.origin_ns;
      return true;
    }
    std::optional<int64_t> base;
    for (const HostTrace* h : hosts_) {
      if (h->line_base_ns != 0 && (!base || h->line_base_ns < *base)) base = h->line_base_ns;
    }
    *origin = base ? *base : EarliestEventSecond(hosts_);
    return true;
  }

  // --- pieces of text ---
  void BeginEvent() {
    out_->append(first_event_ ? "\n" : ",\n");
    first_event_ = false;
  }

  static std::string QuotedString(std::string_view s) {
    std::string q;
    AppendJsonString(s, &q);
    return q;
  }

  void AppendGeneratedMetadata(const std::string& pid, const std::optional<std::string>& tid,
                               std::string_view name, std::string_view arg, const std::string& value) {
    BeginEvent();
    out_->append("{\"ph\":\"M\",\"name\":");
    AppendJsonString(name, out_);
    out_->append(",\"pid\":" + pid);
    if (tid) out_->append(",\"tid\":" + *tid);
    out_->append(",\"args\":{");
    AppendJsonString(arg, out_);
    out_->append(":" + value + "}}");
  }

  void AppendMember(std::string_view key, const std::string& json_value) {
    if (options_.top_level_extra.contains(std::string(key))) return;  // the caller's wins
    AppendJsonString(key, out_);
    out_->append(":" + json_value + ",\n");
  }

  void AppendTopLevelStats(const xspace::XPlane& top) {
    for (const auto& s : top.stats()) {
      if (IsReservedTopLevelStat(top, s)) continue;
      std::string value;
      AppendStatJson(top, s, &value);
      AppendMember(StatName(top, s), value);
    }
  }

  void AppendExtra() {
    for (const auto& [key, value] : options_.top_level_extra.items()) {
      AppendJsonString(key, out_);
      out_->append(":" + value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + ",\n");
    }
  }

  // "chronolinkHosts": what each host was and what the timeline does not
  // show: planes XProf drops (their stats) and a JSON host's top-level keys.
  void AppendHostsMetadata() {
    std::string text = "[";
    for (size_t h = 0; h < hosts_.size(); ++h) {
      const HostTrace& host = *hosts_[h];
      if (h > 0) text += ",";
      text += "{\"host\":" + QuotedString(HostLabel(h));
      text += ",\"source\":" + QuotedString(host.source.string());
      text += std::string(",\"format\":") +
              (host.source_format == TraceFormat::kXSpace ? "\"xspace\"" : "\"chrome_json\"");
      text += ",\"line_base_ns\":" + std::to_string(host.line_base_ns);
      text += ",\"hostnames\":" + StringArray(host.space->hostnames());
      if (host.space->errors_size() > 0) text += ",\"errors\":" + StringArray(host.space->errors());
      if (host.space->warnings_size() > 0) text += ",\"warnings\":" + StringArray(host.space->warnings());
      text += ",\"planes\":{" + UndrawnPlanes(host) + "}}";
    }
    AppendMember(kHostsKey, text + "]");
  }

  static std::string UndrawnPlanes(const HostTrace& host) {
    std::string text;
    for (const auto& plane : host.space->planes()) {
      if (Drawn(host, plane)) continue;
      if (!text.empty()) text += ",";
      AppendJsonString(plane.name(), &text);
      text += ":{";
      bool first = true;
      for (const auto& s : plane.stats()) {
        if (&plane == chrome::FindTopLevelPlane(*host.space) && IsReservedTopLevelStat(plane, s)) {
          continue;
        }
        if (!first) text += ",";
        first = false;
        AppendJsonString(StatName(plane, s), &text);
        text += ":";
        AppendStatJson(plane, s, &text);
      }
      text += "}";
    }
    return text;
  }

  template <typename Strings>
  static std::string StringArray(const Strings& strings) {
    std::string text = "[";
    for (const auto& s : strings) {
      if (text.size() > 1) text += ",";
      AppendJsonString(s, &text);
    }
    return text + "]";
  }

  const std::vector<const HostTrace*>& hosts_;
  const ChromeWriteOptions& options_;
  std::string* out_;
  Flush flush_;
  ChromeEventWriter writer_;
  int grid_exponent_ = kFinestGridExponent;
  bool first_event_ = true;
};

}  // namespace

bool WriteChromeJsonFile(const std::vector<const HostTrace*>& hosts,
                         const std::filesystem::path& path, const ChromeWriteOptions& options,
                         std::string* error) {
  AtomicOutputFile file;
  std::string why;
  bool ok = file.Open(path, &why);
  if (ok) {
    DocumentWriter writer(hosts, options, file.buffer(),
                          [&file](std::string* e) { return file.MaybeFlush(e); });
    ok = writer.Write(&why) && file.Commit(&why);
  }
  if (!ok) *error = path.string() + ": " + why;
  return ok;  // on failure `file` removes its temporary file
}

bool WriteChromeJsonString(const std::vector<const HostTrace*>& hosts,
                           const ChromeWriteOptions& options, std::string* out, std::string* error) {
  out->clear();
  DocumentWriter writer(hosts, options, out, [](std::string*) { return true; });
  return writer.Write(error);
}

}  // namespace chronolink::trace
