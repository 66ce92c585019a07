#include "trace/exporters/chrome_event_writer.h"

#include "trace/importers/chrome_json/chrome_schema.h"
#include "trace/importers/chrome_json/json_text.h"
#include "trace/exporters/micros_grid.h"
#include "trace/model/trace_time.h"

namespace chronolink::trace {
namespace {

using chrome::StatKind;

const xspace::XStatMetadata* StatMetadata(const xspace::XPlane& plane, int64_t id) {
  const auto it = plane.stat_metadata().find(id);
  return it == plane.stat_metadata().end() ? nullptr : &it->second;
}

std::string_view RefName(const xspace::XPlane& plane, const xspace::XStat& stat) {
  const auto* md = StatMetadata(plane, static_cast<int64_t>(stat.ref_value()));
  return md == nullptr ? std::string_view() : std::string_view(md->name());
}

std::string_view StrOrRef(const xspace::XPlane& plane, const xspace::XStat& stat) {
  if (stat.value_case() == xspace::XStat::kRefValue) return RefName(plane, stat);
  if (stat.value_case() == xspace::XStat::kStrValue) return stat.str_value();
  return {};
}

void AppendHex(std::string_view bytes, std::string* out) {
  static constexpr char kDigits[] = "0123456789abcdef";
  out->push_back('"');
  for (const char c : bytes) {
    const auto u = static_cast<unsigned char>(c);
    out->push_back(kDigits[u >> 4]);
    out->push_back(kDigits[u & 15]);
  }
  out->push_back('"');
}

void AppendKey(std::string_view key, std::string* out) {
  AppendJsonString(key, out);
  out->push_back(':');
}

bool IsNumeric(const xspace::XStat& s) {
  return s.value_case() == xspace::XStat::kDoubleValue ||
         s.value_case() == xspace::XStat::kInt64Value ||
         s.value_case() == xspace::XStat::kUint64Value;
}

void AppendValue(const xspace::XPlane& plane, const xspace::XStat& s, bool json, std::string* out) {
  switch (s.value_case()) {
    case xspace::XStat::kDoubleValue: AppendJsonDouble(s.double_value(), out); break;
    case xspace::XStat::kUint64Value: AppendJsonUint(s.uint64_value(), out); break;
    case xspace::XStat::kInt64Value: AppendJsonInt(s.int64_value(), out); break;
    case xspace::XStat::kStrValue:
      if (json) {
        out->append(s.str_value());
      } else {
        AppendJsonString(s.str_value(), out);
      }
      break;
    case xspace::XStat::kBytesValue: AppendHex(s.bytes_value(), out); break;
    case xspace::XStat::kCompressedStrValue: AppendHex(s.compressed_str_value(), out); break;
    case xspace::XStat::kRefValue: AppendJsonString(RefName(plane, s), out); break;
    case xspace::XStat::VALUE_NOT_SET: out->append("null"); break;
  }
}

}  // namespace

void AppendStatJson(const xspace::XPlane& plane, const xspace::XStat& stat, std::string* out) {
  const auto* md = StatMetadata(plane, stat.metadata_id());
  const bool json = md != nullptr && chrome::IsJson(chrome::KindOfDescription(md->description()));
  AppendValue(plane, stat, json, out);
}

std::string_view ChromeEventWriter::PhOf(const xspace::XPlane& plane, const xspace::XEvent& event,
                                         bool counters_line) {
  for (const auto& s : event.stats()) {
    const auto* md = StatMetadata(plane, s.metadata_id());
    if (md != nullptr && md->name() == chrome::kPh &&
        chrome::KindOfDescription(md->description()) == StatKind::kField) {
      return StrOrRef(plane, s);
    }
  }
  return counters_line ? "C" : "X";
}

std::string_view ChromeEventWriter::NameOf(const xspace::XPlane& plane, const xspace::XEvent& event) {
  const auto it = plane.event_metadata().find(event.metadata_id());
  if (it == plane.event_metadata().end()) return {};
  return it->second.display_name().empty() ? it->second.name() : it->second.display_name();
}

void ChromeEventWriter::Classify(const xspace::XPlane& plane, const xspace::XEvent& event) {
  fields_.clear();
  args_.clear();
  ph_.reset();
  keys_.reset();
  size_t inherited = 0;  // args from the event metadata, overridable
  const auto md_it = plane.event_metadata().find(event.metadata_id());
  auto add_arg = [&](std::string_view key, const xspace::XStat* s, bool json) {
    for (size_t k = 0; k < inherited; ++k) {
      if (args_[k].key == key) {
        args_[k] = {key, s, json};
        return;
      }
    }
    args_.push_back({key, s, json});
  };
  auto take = [&](const xspace::XStat& s, bool from_metadata) {
    const auto* md = StatMetadata(plane, s.metadata_id());
    const std::string_view name = md == nullptr ? std::string_view("?") : std::string_view(md->name());
    const StatKind kind = md == nullptr ? StatKind::kArg : chrome::KindOfDescription(md->description());
    if (!chrome::IsField(kind)) {
      add_arg(name, &s, kind == StatKind::kArgJson);
      if (from_metadata) inherited = args_.size();
      return;
    }
    if (name == chrome::kPh) {
      ph_ = StrOrRef(plane, s);
    } else if (name == chrome::kKeys && s.value_case() == xspace::XStat::kInt64Value) {
      keys_ = s.int64_value();
    } else {
      std::string_view key = name;
      if (key.substr(0, chrome::kFieldPrefix.size()) == chrome::kFieldPrefix) {
        key.remove_prefix(chrome::kFieldPrefix.size());
      }
      fields_.push_back({key, &s, kind == StatKind::kFieldJson});
    }
  };
  if (md_it != plane.event_metadata().end()) {
    for (const auto& s : md_it->second.stats()) take(s, true);
  }
  for (const auto& s : event.stats()) take(s, false);
}

bool ChromeEventWriter::AppendTimes(const ChromeEventPlace& place, const xspace::XLine& line,
                                    const xspace::XEvent& event, std::string_view ph, int64_t keys,
                                    std::string* out, std::string* error) const {
  if (ph == "M") return true;  // metadata ts/dur are fields, written verbatim
  const bool timed = event.data_case() != xspace::XEvent::kNumOccurrences;
  const int grid = place.grid_exponent;
  std::optional<int64_t> start_ticks;
  __int128 start_ps = 0;
  if ((keys & chrome::kHasTs) != 0 && timed) {
    // Relative first, so a relative trace with a far base never overflows.
    int64_t base_rel = 0;
    const auto start = __builtin_sub_overflow(place.line_base_ns, place.origin_ns, &base_rel)
                           ? std::nullopt
                           : EventStart(base_rel, line, event);
    if (start) {
      start_ps = static_cast<__int128>(start->ns) * 1000 + start->ps;
      start_ticks = GridTicks(start_ps, grid);
    }
    if (!start_ticks) {
      *error = "an event's time does not fit int64 ns relative to the output's origin";
      return false;
    }
    out->append(",\"ts\":");
    AppendGridMicros(*start_ticks, grid, out);
  }
  if ((keys & chrome::kHasDur) != 0) {
    // The end rounded as any instant is, so that ends equal in the model are equal as read.
    const auto end_ticks = GridTicks(start_ps + event.duration_ps(), grid);
    if (!end_ticks) {
      *error = "an event's end does not fit the output's time grid";
      return false;
    }
    out->append(",\"dur\":");
    AppendGridMicros(*end_ticks - start_ticks.value_or(0), grid, out);
  }
  return true;
}

void ChromeEventWriter::AppendArgs(const ChromeEventPlace& place, std::string_view ph,
                                   std::string_view name, bool force, std::string* out) const {
  if (args_.empty() && !force) return;
  const std::string* rename = nullptr;
  if (ph == "M" && name == chrome::kProcessName) rename = place.process_name;
  if (ph == "M" && name == chrome::kThreadName) rename = place.thread_name;
  const bool numeric_only = ph == "C" && !ph_.has_value();  // counters drawn from an XSpace line
  out->append(",\"args\":{");
  bool first = true;
  for (const auto& a : args_) {
    if (numeric_only && !IsNumeric(*a.stat)) continue;
    if (!first) out->push_back(',');
    first = false;
    AppendKey(a.key, out);
    if (rename != nullptr && a.key == "name") {
      AppendJsonString(*rename, out);
    } else {
      AppendValue(*place.plane, *a.stat, a.json, out);
    }
  }
  out->push_back('}');
}

bool ChromeEventWriter::Write(const ChromeEventPlace& place, const xspace::XLine& line,
                              const xspace::XEvent& event, std::string* out, std::string* error) {
  const xspace::XPlane& plane = *place.plane;
  Classify(plane, event);
  const std::string_view ph = ph_.value_or(place.counters_line ? "C" : "X");
  const int64_t keys = keys_.value_or(chrome::DefaultKeys(ph, !args_.empty()));
  const std::string_view name = NameOf(plane, event);
  out->append("{\"ph\":");
  AppendJsonString(ph, out);
  if ((keys & chrome::kHasName) != 0) {
    out->append(",\"name\":");
    AppendJsonString(name, out);
  }
  out->append(",\"pid\":");
  out->append(place.pid_text);
  if (place.tid_text) {
    out->append(",\"tid\":");
    out->append(*place.tid_text);
  }
  if (!AppendTimes(place, line, event, ph, keys, out, error)) return false;
  for (const auto& f : fields_) {
    out->push_back(',');
    AppendKey(f.key, out);
    AppendValue(plane, *f.stat, f.json, out);
  }
  AppendArgs(place, ph, name, (keys & chrome::kHasArgs) != 0, out);
  out->push_back('}');
  return true;
}

}  // namespace chronolink::trace
