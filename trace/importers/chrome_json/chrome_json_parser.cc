#include "trace/importers/chrome_json/chrome_json_parser.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <unordered_set>

#include <nlohmann/json.hpp>

#include "trace/importers/chrome_json/json_text.h"
#include "trace/importers/chrome_json/micros_text.h"
#include "trace/importers/xspace/line_base.h"
#include "common/quoted_text.h"

namespace chronolink::trace {
namespace {

using chrome::StatKind;
using Kind = JsonScalar::Kind;

// Reserved stat names as std::string, for the interning maps' lookups.
const std::string kPhName(chrome::kPh);
const std::string kCatName(chrome::kCat);
const std::string kKeysName(chrome::kKeys);
const std::string kPidName(chrome::kPid);
const std::string kTidsName(chrome::kTids);
const std::string kFormName(chrome::kForm);
const std::string kHadBaseTimeName(chrome::kHadBaseTime);

// An integer pid/tid that fits int64, which becomes the plane/line id. A
// float with such a value is that integer ("5.0" is pid 5 to any viewer).
std::optional<int64_t> IntId(const JsonScalar& v) {
  if (v.kind == Kind::kInt) return v.i;
  if (v.kind == Kind::kUint && v.u <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    return static_cast<int64_t>(v.u);
  }
  // [-2^63, 2^63): every double in it converts exactly when it is whole.
  if (v.kind == Kind::kDouble && v.d >= -9223372036854775808.0 && v.d < 9223372036854775808.0 &&
      std::trunc(v.d) == v.d) {
    return static_cast<int64_t>(v.d);
  }
  return std::nullopt;
}

// The identity of a pid/tid that is not an int64, as JSON text. Numbers and
// nested values are normalised the way the writer prints them (and the way
// any viewer's JSON parser reads them: "1e3" and "1000.0" are one thread),
// so two spellings of one value name one process or thread, and a trace
// read, written and read again keeps its processes and threads.
std::string IdentityText(const JsonScalar& v) {
  if (v.kind == Kind::kDouble) return nlohmann::json(v.d).dump();
  if (v.kind == Kind::kUint) return nlohmann::json(static_cast<double>(v.u)).dump();  // past int64: a double's value
  if (v.kind == Kind::kJson) {
    const auto j = nlohmann::json::parse(v.text, nullptr, /*allow_exceptions=*/false);
    if (!j.is_discarded()) return j.dump();
  }
  return v.ToJsonText();
}

bool ToNsPs(const JsonScalar& v, std::string_view key, NsPs* out, std::string* error) {
  bool ok = false;
  switch (v.kind) {
    case Kind::kInt: ok = MicrosIntToNs(v.i, out); break;
    case Kind::kUint: ok = MicrosUintToNs(v.u, out); break;
    case Kind::kDouble: ok = ParseMicrosText(v.text, out) == MicrosParse::kOk; break;
    default:
      *error = "\"" + std::string(key) + "\" is " +
               (v.kind == Kind::kString ? "a string" : "not a number") + ", expected microseconds";
      return false;
  }
  if (!ok) *error = "\"" + std::string(key) + "\" does not fit int64 nanoseconds";
  return ok;
}

// The last member named `key`, as a JSON parser that builds an object
// (every viewer) keeps it.
const JsonScalar* FindArg(const PendingEvent& e, std::string_view key) {
  const JsonScalar* found = nullptr;
  for (const auto& m : e.args()) {
    if (m.key == key) found = &m.value;
  }
  return found;
}

// Ids for the pids/tids that are not int64: past the largest int64 one,
// or, where that is INT64_MAX, the first ones unused from 0 up.
class FreshIds {
 public:
  void Use(int64_t id) {
    used_.insert(id);
    largest_ = std::max(largest_, id);
  }
  int64_t Next() {
    if (!started_) {
      started_ = true;
      next_ = used_.empty() ? 0 : largest_ == std::numeric_limits<int64_t>::max() ? 0 : largest_ + 1;
    }
    while (used_.contains(next_)) ++next_;
    used_.insert(next_);
    return next_++;
  }

 private:
  std::unordered_set<int64_t> used_;
  int64_t largest_ = std::numeric_limits<int64_t>::min();
  int64_t next_ = 0;
  bool started_ = false;
};

}  // namespace

struct ChromeTraceBuilder::LineState {
  xspace::XLine* line = nullptr;
  bool int_tid = true;
  std::string raw_tid;  // JSON text of a non-int64 tid; "" when the events had none
  bool has_timed = false;
  int64_t min_offset_ps = 0;
  int64_t max_end_ps = 0;
};

struct ChromeTraceBuilder::PlaneState {
  xspace::XPlane* plane = nullptr;
  bool int_pid = true;
  std::string raw_pid;  // JSON text of a non-int64 pid
  std::vector<std::unique_ptr<LineState>> lines;
  std::unordered_map<int64_t, LineState*> int_lines;
  std::unordered_map<std::string, LineState*> other_lines;
  std::unordered_map<std::string, int64_t> event_md;
  std::array<std::unordered_map<std::string, int64_t>, 5> stat_md;  // by StatKind
  int64_t next_event_md = 1;
  int64_t next_stat_md = 1;
};

ChromeTraceBuilder::ChromeTraceBuilder(HostTrace* out) : out_(out) {
  out_->source_format = TraceFormat::kChromeJson;
  out_->clock = TraceClock::kHostRealtime;
}

ChromeTraceBuilder::~ChromeTraceBuilder() = default;

void ChromeTraceBuilder::OnForm(bool object_form) { object_form_ = object_form; }

bool ChromeTraceBuilder::OnTopLevel(const JsonMember& member, std::string* error) {
  if (member.key != chrome::kBaseTimeKey) {
    top_level_.push_back(member);
    return true;
  }
  const auto base = IntId(member.value);
  if (!base) {
    *error = "\"baseTimeNanoseconds\" must be an integer (epoch nanoseconds)";
    return false;
  }
  base_time_ns_ = *base;
  return true;
}

ChromeTraceBuilder::PlaneState* ChromeTraceBuilder::PlaneFor(const JsonScalar& pid) {
  const auto id = IntId(pid);
  std::string raw;
  if (id) {
    if (auto it = int_planes_.find(*id); it != int_planes_.end()) return it->second;
  } else {
    raw = IdentityText(pid);
    if (auto it = other_planes_.find(raw); it != other_planes_.end()) return it->second;
  }
  auto state = std::make_unique<PlaneState>();
  state->plane = out_->space->add_planes();
  state->int_pid = id.has_value();
  if (id) {
    state->plane->set_id(*id);
    int_planes_[*id] = state.get();
  } else {
    state->raw_pid = raw;
    other_planes_[raw] = state.get();
  }
  planes_.push_back(std::move(state));
  return planes_.back().get();
}

ChromeTraceBuilder::LineState* ChromeTraceBuilder::LineFor(PlaneState* plane, const JsonScalar& tid) {
  const auto id = IntId(tid);
  std::string raw;
  if (id) {
    if (auto it = plane->int_lines.find(*id); it != plane->int_lines.end()) return it->second;
  } else {
    raw = tid.present() ? IdentityText(tid) : std::string();
    if (auto it = plane->other_lines.find(raw); it != plane->other_lines.end()) return it->second;
  }
  auto state = std::make_unique<LineState>();
  state->line = plane->plane->add_lines();
  state->int_tid = id.has_value();
  if (id) {
    state->line->set_id(*id);
    plane->int_lines[*id] = state.get();
  } else {
    state->raw_tid = raw;
    plane->other_lines[raw] = state.get();
  }
  plane->lines.push_back(std::move(state));
  return plane->lines.back().get();
}

int64_t ChromeTraceBuilder::StatMetadataId(PlaneState* plane, const std::string& name, StatKind kind) {
  auto& ids = plane->stat_md[static_cast<size_t>(kind)];
  if (auto it = ids.find(name); it != ids.end()) return it->second;
  const int64_t id = plane->next_stat_md++;
  auto& md = (*plane->plane->mutable_stat_metadata())[id];
  md.set_id(id);
  md.set_name(name);
  md.set_description(std::string(chrome::DescriptionOf(kind)));
  ids.emplace(name, id);
  return id;
}

int64_t ChromeTraceBuilder::EventMetadataId(PlaneState* plane, const std::string& name) {
  if (auto it = plane->event_md.find(name); it != plane->event_md.end()) return it->second;
  const int64_t id = plane->next_event_md++;
  auto& md = (*plane->plane->mutable_event_metadata())[id];
  md.set_id(id);
  md.set_name(name);
  plane->event_md.emplace(name, id);
  return id;
}

void ChromeTraceBuilder::AddStat(PlaneState* plane, StatList* stats, const std::string& name,
                                 StatKind kind, const JsonScalar& v) {
  const StatKind json_kind = chrome::IsField(kind) ? StatKind::kFieldJson : StatKind::kArgJson;
  // A float whose shortest text is not what was written (1.0e3, 5.0,
  // more digits than a double holds) stays text, so it is written back as is.
  const bool exact_double = v.kind == Kind::kDouble && JsonDoubleText(v.d) == v.text;
  const bool as_json = v.kind == Kind::kJson || (v.kind == Kind::kDouble && !exact_double);
  xspace::XStat* s = stats->Add();
  s->set_metadata_id(StatMetadataId(plane, name, as_json ? json_kind : kind));
  switch (v.kind) {
    case Kind::kInt: s->set_int64_value(v.i); break;
    case Kind::kUint:
      if (v.u <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        s->set_int64_value(static_cast<int64_t>(v.u));
      } else {
        s->set_uint64_value(v.u);
      }
      break;
    case Kind::kDouble:
      if (exact_double) {
        s->set_double_value(v.d);
      } else {
        s->set_str_value(v.text);
      }
      break;
    case Kind::kString:
    case Kind::kJson: s->set_str_value(v.text); break;
    case Kind::kAbsent: s->set_str_value("null"); break;
  }
}

void ChromeTraceBuilder::AddRef(PlaneState* plane, xspace::XEvent* event, const std::string& name,
                                const std::string& value) {
  xspace::XStat* s = event->add_stats();
  s->set_metadata_id(StatMetadataId(plane, name, StatKind::kField));
  s->set_ref_value(static_cast<uint64_t>(StatMetadataId(plane, value, StatKind::kRefTarget)));
}

bool ChromeTraceBuilder::PlaceInTime(const PendingEvent& e, LineState* line, xspace::XEvent* event,
                                     std::string* error) {
  const bool meta = e.ph.text == "M";
  if (!meta && e.dur.present()) {
    NsPs dur;
    int64_t dur_ps = 0;
    if (!ToNsPs(e.dur, "dur", &dur, error)) return false;
    if (__builtin_mul_overflow(dur.ns, int64_t{1000}, &dur_ps) ||
        __builtin_add_overflow(dur_ps, int64_t{dur.ps}, &dur_ps)) {
      *error = "\"dur\" is longer than int64 picoseconds (106 days)";
      return false;
    }
    event->set_duration_ps(dur_ps);
  }
  if (meta || !e.ts.present()) {
    event->set_num_occurrences(1);  // no instant: align and the timeline leave it alone
    return true;
  }
  NsPs ts;
  if (!ToNsPs(e.ts, "ts", &ts, error)) return false;
  const bool absolute = ts.ns >= kAbsoluteLineThresholdNs || ts.ns <= -kAbsoluteLineThresholdNs;
  ++(absolute ? absolute_events_ : relative_events_);
  if (!line->has_timed) {
    line->line->set_timestamp_ns(ts.ns);
    line->has_timed = true;
    line->min_offset_ps = line->max_end_ps = ts.ps;
  }
  int64_t offset = 0;
  if (__builtin_sub_overflow(ts.ns, line->line->timestamp_ns(), &offset) ||
      __builtin_mul_overflow(offset, int64_t{1000}, &offset) ||
      __builtin_add_overflow(offset, int64_t{ts.ps}, &offset)) {
    *error = "\"ts\" lies more than 106 days from the first event of its thread";
    return false;
  }
  event->set_offset_ps(offset);
  int64_t end = 0;
  if (__builtin_add_overflow(offset, event->duration_ps(), &end)) {
    end = event->duration_ps() > 0 ? std::numeric_limits<int64_t>::max() : offset;
  }
  line->min_offset_ps = std::min(line->min_offset_ps, offset);
  line->max_end_ps = std::max({line->max_end_ps, end, offset});
  return true;
}

void ChromeTraceBuilder::AddEventStats(const PendingEvent& e, PlaneState* plane, xspace::XEvent* event) {
  const std::string& ph = e.ph.text;
  const bool meta = ph == "M";
  if (ph != "X") AddRef(plane, event, kPhName, ph);
  std::string field;
  auto add_field = [&](std::string_view key, const JsonScalar& v) {
    field.assign(chrome::kFieldPrefix);
    field.append(key);
    AddStat(plane, event->mutable_stats(), field, StatKind::kField, v);
  };
  if (e.name.present() && e.name.kind != Kind::kString) add_field("name", e.name);
  if (meta && e.ts.present()) add_field("ts", e.ts);  // metadata has no instant: kept verbatim
  if (meta && e.dur.present()) add_field("dur", e.dur);
  for (const auto& f : e.fields()) {
    if (f.key == "cat" && f.value.kind == Kind::kString) {
      AddRef(plane, event, kCatName, f.value.text);
    } else {
      add_field(f.key, f.value);
    }
  }
  for (const auto& a : e.args()) AddStat(plane, event->mutable_stats(), a.key, StatKind::kArg, a.value);
  int64_t keys = 0;
  if (e.name.kind == Kind::kString) keys |= chrome::kHasName;
  if (!meta && e.ts.present()) keys |= chrome::kHasTs;
  if (!meta && e.dur.present()) keys |= chrome::kHasDur;
  if (e.has_args_object) keys |= chrome::kHasArgs;
  if (keys != chrome::DefaultKeys(ph, !e.args().empty())) {
    JsonScalar bits;
    bits.kind = Kind::kInt;
    bits.i = keys;
    AddStat(plane, event->mutable_stats(), kKeysName, StatKind::kField, bits);
  }
}

void ChromeTraceBuilder::ApplyMetadataEvent(const PendingEvent& e, PlaneState* plane, LineState* line) {
  if (e.name.kind != Kind::kString) return;
  const JsonScalar* name = FindArg(e, "name");
  if (name == nullptr || name->kind != Kind::kString) return;
  if (e.name.text == chrome::kProcessName) plane->plane->set_name(name->text);
  if (e.name.text == chrome::kThreadName) line->line->set_name(name->text);
}

bool ChromeTraceBuilder::OnEvent(const PendingEvent& e, std::string* error) {
  if (!e.ph.present()) {
    *error = "the event has no \"ph\"";
    return false;
  }
  if (e.ph.kind != Kind::kString) {
    *error = "\"ph\" is not a string";
    return false;
  }
  if (!e.pid.present()) {
    *error = "the event has no \"pid\"";
    return false;
  }
  const std::string& ph = e.ph.text;
  if (!e.tid.present() && (ph == "X" || ph == "B" || ph == "E")) {
    *error = "the event (ph \"" + ph + "\") has no \"tid\"";
    return false;
  }
  PlaneState* plane = PlaneFor(e.pid);
  LineState* line = LineFor(plane, e.tid);
  xspace::XEvent* event = line->line->add_events();
  static const std::string kNoName;
  event->set_metadata_id(EventMetadataId(plane, e.name.kind == Kind::kString ? e.name.text : kNoName));
  if (!PlaceInTime(e, line, event, error)) return false;
  AddEventStats(e, plane, event);
  if (ph == "M") ApplyMetadataEvent(e, plane, line);
  return true;
}

void ChromeTraceBuilder::AssignIds() {
  FreshIds plane_ids;
  for (const auto& p : planes_) {
    if (p->int_pid) plane_ids.Use(p->plane->id());
  }
  for (const auto& p : planes_) {
    if (!p->int_pid) {
      p->plane->set_id(plane_ids.Next());
      xspace::XStat* s = p->plane->add_stats();
      s->set_metadata_id(StatMetadataId(p.get(), kPidName, StatKind::kFieldJson));
      s->set_str_value(p->raw_pid);
    }
    FreshIds line_ids;
    for (const auto& l : p->lines) {
      if (l->int_tid) line_ids.Use(l->line->id());
    }
    std::string tids;  // {"<line id>": <tid JSON or null>, ...}
    for (const auto& l : p->lines) {
      if (l->int_tid) continue;
      l->line->set_id(line_ids.Next());
      tids += tids.empty() ? "{" : ",";
      tids += "\"" + std::to_string(l->line->id()) + "\":" + (l->raw_tid.empty() ? "null" : l->raw_tid);
    }
    if (!tids.empty()) {
      xspace::XStat* s = p->plane->add_stats();
      s->set_metadata_id(StatMetadataId(p.get(), kTidsName, StatKind::kFieldJson));
      s->set_str_value(tids + "}");
    }
  }
}

// Line timestamps become each line's earliest event (floored to a whole ns)
// so that no offset is negative; lines with no timed event take the trace's
// earliest line timestamp, a harmless instant inside the trace.
bool ChromeTraceBuilder::NormaliseLines(std::string* error) {
  std::optional<int64_t> earliest;
  for (const auto& p : planes_) {
    for (const auto& l : p->lines) {
      if (!l->has_timed) continue;
      xspace::XLine* line = l->line;
      const int64_t shift_ns = l->min_offset_ps < 0 ? (-l->min_offset_ps + 999) / 1000 : 0;
      if (shift_ns > 0) {
        line->set_timestamp_ns(line->timestamp_ns() - shift_ns);
        for (auto& ev : *line->mutable_events()) {
          if (ev.data_case() != xspace::XEvent::kOffsetPs) continue;
          int64_t moved = 0;
          if (__builtin_add_overflow(ev.offset_ps(), shift_ns * 1000, &moved)) {
            *error = "thread " + QuotedText(line->name()) + " of pid " + std::to_string(p->plane->id()) +
                     " spans more than 106 days";
            return false;
          }
          ev.set_offset_ps(moved);
        }
      }
      int64_t span = 0;
      if (__builtin_add_overflow(l->max_end_ps, shift_ns * 1000, &span)) {
        span = std::numeric_limits<int64_t>::max();
      }
      line->set_duration_ps(span);
      if (!earliest || line->timestamp_ns() < *earliest) earliest = line->timestamp_ns();
    }
  }
  for (const auto& p : planes_) {
    for (const auto& l : p->lines) {
      if (!l->has_timed) l->line->set_timestamp_ns(earliest.value_or(0));
    }
  }
  return true;
}

void ChromeTraceBuilder::DecideTimeBase(std::optional<int64_t> origin_ns) {
  out_->line_base_ns = 0;
  out_->line_base_known = true;
  if (base_time_ns_) {
    out_->line_base_ns = *base_time_ns_;
    return;
  }
  if (absolute_events_ > 0) {
    if (relative_events_ > 0) {
      out_->space->add_warnings(std::to_string(relative_events_) +
                                " events have small (relative-looking) ts in a trace of absolute "
                                "epoch timestamps; they are kept as absolute");
    }
    return;
  }
  if (relative_events_ == 0) return;  // nothing timed: nothing to place
  if (origin_ns) {
    out_->line_base_ns = *origin_ns;
  } else {
    out_->line_base_known = false;
  }
}

void ChromeTraceBuilder::StoreTopLevel() {
  PlaneState state;
  state.plane = out_->space->add_planes();
  int64_t next_id = 0;
  for (const auto& p : out_->space->planes()) next_id = std::max(next_id, p.id() + 1);
  state.plane->set_id(next_id);
  state.plane->set_name(std::string(chrome::kTopLevelPlane));
  auto add = [&](const std::string& name, StatKind kind, const JsonScalar& v) {
    AddStat(&state, state.plane->mutable_stats(), name, kind, v);
  };
  JsonScalar form;
  form.kind = Kind::kString;
  form.text = object_form_ ? "object" : "array";
  add(kFormName, StatKind::kField, form);
  if (base_time_ns_) {
    JsonScalar one;
    one.kind = Kind::kInt;
    one.i = 1;
    add(kHadBaseTimeName, StatKind::kField, one);
  }
  for (const auto& m : top_level_) add(m.key, StatKind::kArg, m.value);
}

bool ChromeTraceBuilder::Finish(std::optional<int64_t> origin_ns, std::string* error) {
  AssignIds();
  if (!NormaliseLines(error)) return false;
  DecideTimeBase(origin_ns);
  StoreTopLevel();
  if (!out_->host.empty()) out_->space->add_hostnames(out_->host);
  return true;
}

}  // namespace chronolink::trace
