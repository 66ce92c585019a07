#include "trace/correct/timebase_file.h"

#include <algorithm>
#include <charconv>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>

#include "common/gzip_file.h"
#include "common/rotating_file.h"

namespace chronolink::trace {

namespace {

using Json = nlohmann::json;

bool Int64Of(const Json& j, const char* name, int64_t* out) {
  const auto it = j.find(name);
  if (it == j.end()) return false;
  if (it->is_number_unsigned()) {
    if (it->get<uint64_t>() > uint64_t{std::numeric_limits<int64_t>::max()}) return false;
    *out = static_cast<int64_t>(it->get<uint64_t>());
    return true;
  }
  if (!it->is_number_integer()) return false;
  *out = it->get<int64_t>();
  return true;
}

// A decimal int64 given as a string (the columns' starts: epoch nanoseconds
// that a reader parsing doubles would round).
bool Int64OfString(const Json& v, int64_t* out) {
  if (!v.is_string()) return false;
  const std::string& text = v.get_ref<const std::string&>();
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, *out);
  return ec == std::errc() && ptr == end && !text.empty();
}

bool Int64OfValue(const Json& v, int64_t* out) {
  if (v.is_number_unsigned()) {
    if (v.get<uint64_t>() > uint64_t{std::numeric_limits<int64_t>::max()}) return false;
    *out = static_cast<int64_t>(v.get<uint64_t>());
    return true;
  }
  if (!v.is_number_integer()) return false;
  *out = v.get<int64_t>();
  return true;
}

// `name`'s entries as knot indices: integers in [0, knots), ascending.
bool KnotFlags(const Json& j, const char* name, size_t knots, std::vector<bool>* flags) {
  const auto it = j.find(name);
  if (it == j.end() || !it->is_array()) return false;
  flags->assign(knots, false);
  int64_t previous = -1;
  for (const Json& v : *it) {
    int64_t i = 0;
    if (!Int64OfValue(v, &i) || i <= previous || i >= static_cast<int64_t>(knots)) return false;
    (*flags)[static_cast<size_t>(i)] = true;
    previous = i;
  }
  return true;
}

}  // namespace

long double TimebaseStretch::RawSince(int64_t from_realtime_ns, int64_t to_realtime_ns) const {
  // Each instant as (its segment's left knot, RAW from there): the knots'
  // difference is exact in int64, the rest small.
  const auto locate = [&](int64_t x, long double* past) -> size_t {
    auto after = std::upper_bound(knots.begin(), knots.end(), x,
                                  [](int64_t v, const TimebasePoint& k) { return v < k.realtime_ns; });
    size_t i = after == knots.begin() ? 0 : static_cast<size_t>(after - knots.begin()) - 1;
    if (i + 1 >= knots.size()) i = knots.size() - 2;  // the last knot: its segment from the left
    const TimebasePoint& a = knots[i];
    const TimebasePoint& b = knots[i + 1];
    *past = static_cast<long double>(x - a.realtime_ns) * static_cast<long double>(b.raw_ns - a.raw_ns) /
            static_cast<long double>(b.realtime_ns - a.realtime_ns);
    return i;
  };
  long double from_past = 0, to_past = 0;
  const size_t i = locate(from_realtime_ns, &from_past);
  const size_t k = locate(to_realtime_ns, &to_past);
  return static_cast<long double>(knots[k].raw_ns - knots[i].raw_ns) + to_past - from_past;
}

std::vector<TimebasePoint> TimebaseStretch::KnotsWithin(int64_t from_realtime_ns, int64_t to_realtime_ns) const {
  std::vector<TimebasePoint> out;
  auto it = std::upper_bound(knots.begin(), knots.end(), from_realtime_ns,
                             [](int64_t x, const TimebasePoint& k) { return x < k.realtime_ns; });
  for (; it != knots.end() && it->realtime_ns < to_realtime_ns; ++it) out.push_back(*it);
  return out;
}

const TimebaseStretch* NodeTimebase::Covering(int64_t from_realtime_ns, int64_t to_realtime_ns) const {
  for (const TimebaseStretch& s : stretches) {
    if (s.knots.size() >= 2 && s.first_realtime_ns() <= from_realtime_ns && to_realtime_ns <= s.last_realtime_ns()) {
      return &s;
    }
  }
  return nullptr;
}

// The files rotated out of `path` first (a large cluster's leader rotates
// its cluster-timebase.jsonl), all one source: a session goes on across
// them.
bool TimebaseReader::AddFile(const std::string& path, std::string* error) {
  ++source_;
  for (const std::string& file : RotatedSet(path)) {
    columns_last_.clear();  // each file of a rotated set decodes from its own start
    LineFileReader in;
    if (!in.Open(file, error)) return false;
    std::string line;
    uint64_t number = 0;
    while (in.Next(&line)) {
      ++number;
      if (!AddLine(line, file + ":" + std::to_string(number), error)) return false;
    }
    if (!in.error().empty()) {
      *error = in.error() + " (after line " + std::to_string(number) + ")";
      return false;
    }
  }
  return true;
}

bool TimebaseReader::AddText(std::string_view text, const std::string& name, std::string* error) {
  uint64_t number = 0;
  ++source_;
  columns_last_.clear();
  while (!text.empty()) {
    const size_t end = text.find('\n');
    ++number;
    if (!AddLine(text.substr(0, end), name + ":" + std::to_string(number), error)) return false;
    if (end == std::string_view::npos) break;
    text.remove_prefix(end + 1);
  }
  return true;
}

bool TimebaseReader::AddLine(std::string_view line, const std::string& where, std::string* error) {
  if (line.find_first_not_of(" \t\r") == std::string_view::npos) return true;
  const Json j = Json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    *error = where + ": not a JSON object";
    return false;
  }
  const auto schema = j.find("schema");
  if (schema != j.end() && *schema == kTimebaseColumnsSchema) return AddColumnsLine(j, where, error);
  if (schema == j.end() || *schema != kTimebaseSchema) {
    *error = where + ": schema is neither \"" + kTimebaseSchema + "\" nor \"" + kTimebaseColumnsSchema +
             "\" (a timebase.jsonl line)";
    return false;
  }
  int64_t node = 0;
  TimebasePoint p;
  const auto session = j.find("session");
  const auto step = j.find("after_step");
  if (!Int64Of(j, "node", &node) || node < 0 || node > int64_t{std::numeric_limits<uint32_t>::max()} ||
      !Int64Of(j, "raw_ns", &p.raw_ns) || !Int64Of(j, "realtime_ns", &p.realtime_ns) || session == j.end() ||
      !session->is_string() || step == j.end() || !step->is_boolean()) {
    *error = where + ": needs integer node, raw_ns and realtime_ns, string session and boolean after_step";
    return false;
  }
  // after_gap (the leader's cluster-timebase.jsonl): the knots before it
  // never reached the leader; like a step, nothing is known across it.
  const auto gap = j.find("after_gap");
  if (gap != j.end() && !gap->is_boolean()) {
    *error = where + ": after_gap is not a boolean";
    return false;
  }
  return AddKnot(static_cast<uint32_t>(node), session->get<std::string>(), p, step->get<bool>(),
                 gap != j.end() && gap->get<bool>(), where, error);
}

bool TimebaseReader::AddKnot(uint32_t node, const std::string& session, const TimebasePoint& p, bool after_step,
                             bool after_gap, const std::string& where, std::string* error) {
  std::vector<TimebaseStretch>& run = runs_[Key{source_, node, session}];
  if (run.empty() || after_step || after_gap) run.emplace_back();
  std::vector<TimebasePoint>& knots = run.back().knots;
  if (!knots.empty() && !(p.raw_ns > knots.back().raw_ns && p.realtime_ns > knots.back().realtime_ns)) {
    *error = where + ": a knot must come after the one before it in both clocks (raw_ns " +
             std::to_string(p.raw_ns) + ", realtime_ns " + std::to_string(p.realtime_ns) + ")";
    return false;
  }
  knots.push_back(p);
  return true;
}

bool TimebaseReader::AddColumnsLine(const Json& j, const std::string& where, std::string* error) {
  const auto array = [&](const char* name) -> const Json* {
    const auto it = j.find(name);
    return it != j.end() && it->is_array() ? &*it : nullptr;
  };
  const Json *node_delta = array("node_delta"), *counts = array("knots"), *starts = array("starts"),
             *raw_step = array("raw_step_ns"), *offset_step = array("offset_step_ns");
  if (!node_delta || !counts || !starts || !raw_step || !offset_step) {
    *error = where + ": a columns line needs the arrays node_delta, knots, starts, raw_step_ns and offset_step_ns";
    return false;
  }
  const size_t groups = node_delta->size(), knots = raw_step->size();
  if (counts->size() != groups || offset_step->size() != knots) {
    *error = where +
             ": the per-group columns (node_delta, knots) and the per-knot ones (raw_step_ns, "
             "offset_step_ns) must each have one length";
    return false;
  }
  // starts: [group, "session", "raw_ns", "realtime minus raw ns"], by ascending group.
  size_t next_start = 0;
  std::vector<bool> after_step, after_gap;
  if (!KnotFlags(j, "after_step", knots, &after_step) || !KnotFlags(j, "after_gap", knots, &after_gap)) {
    *error =
        where + ": after_step and after_gap must be arrays of ascending knot indices below " + std::to_string(knots);
    return false;
  }
  int64_t node = 0;
  size_t k = 0;
  for (size_t g = 0; g < groups; ++g) {
    const std::string at = where + ": node group " + std::to_string(g);
    int64_t delta = 0, count = 0;
    if (!Int64OfValue((*node_delta)[g], &delta) || delta < 0 ||
        delta > int64_t{std::numeric_limits<uint32_t>::max()} - node) {
      *error = at + ": node_delta must be a non-negative integer keeping the node id within 32 bits";
      return false;
    }
    node += delta;
    if (!Int64OfValue((*counts)[g], &count) || count < 1 || static_cast<uint64_t>(count) > knots - k) {
      *error = at + ": knots must be a positive integer, and all of them together raw_step_ns's length";
      return false;
    }
    ColumnsLast base;
    int64_t start_group = -1;
    if (next_start < starts->size()) {
      const Json& s = (*starts)[next_start];
      if (!s.is_array() || s.size() != 4 || !Int64OfValue(s[0], &start_group) ||
          start_group < static_cast<int64_t>(g) || start_group >= static_cast<int64_t>(groups) || !s[1].is_string() ||
          !Int64OfString(s[2], &base.raw_ns) || !Int64OfString(s[3], &base.offset_ns)) {
        *error = where + ": start " + std::to_string(next_start) +
                 " must be [group, \"session\", \"raw_ns\", "
                 "\"offset_ns\"], integers in strings, groups ascending within the line";
        return false;
      }
    }
    if (start_group == static_cast<int64_t>(g)) {
      base.session = (*starts)[next_start][1].get<std::string>();
      ++next_start;
    } else if (const auto last = columns_last_.find(static_cast<uint32_t>(node)); last != columns_last_.end()) {
      base = last->second;
    } else {
      *error = at + ": no start, and this file had no knot of node " + std::to_string(node) + " before";
      return false;
    }
    const std::string& group_session = base.session;
    for (int64_t c = 0; c < count; ++c, ++k) {
      int64_t raw = 0, offset = 0, dr = 0, doff = 0;
      TimebasePoint p;
      if (!Int64OfValue((*raw_step)[k], &dr) || !Int64OfValue((*offset_step)[k], &doff) ||
          __builtin_add_overflow(base.raw_ns, dr, &raw) || __builtin_add_overflow(base.offset_ns, doff, &offset) ||
          __builtin_add_overflow(raw, offset, &p.realtime_ns)) {
        *error = where + ": knot " + std::to_string(k) +
                 ": raw_step_ns and offset_step_ns must be integers whose "
                 "sums stay within int64";
        return false;
      }
      p.raw_ns = raw;
      if (!AddKnot(static_cast<uint32_t>(node), group_session, p, after_step[k], after_gap[k],
                   where + ": knot " + std::to_string(k), error)) {
        return false;
      }
      base.raw_ns = raw;
      base.offset_ns = offset;
    }
    columns_last_[static_cast<uint32_t>(node)] = base;
  }
  if (k != knots) {
    *error = where + ": the groups' knots add up to " + std::to_string(k) + ", not raw_step_ns's length " +
             std::to_string(knots);
    return false;
  }
  if (next_start != starts->size()) {
    *error = where + ": starts name groups that are not in the line, or one twice";
    return false;
  }
  return true;
}

bool TimebaseReader::Finish(std::map<uint32_t, NodeTimebase>* out, std::string* error) {
  out->clear();
  for (auto& [key, run] : runs_) {
    NodeTimebase& n = (*out)[key.node];
    n.node = key.node;
    for (TimebaseStretch& s : run) n.stretches.push_back(std::move(s));
  }
  runs_.clear();
  if (out->empty()) {
    *error = "no timebase knots read";
    return false;
  }
  for (auto& [node, n] : *out) {
    std::sort(n.stretches.begin(), n.stretches.end(), [](const TimebaseStretch& a, const TimebaseStretch& b) {
      return a.first_realtime_ns() < b.first_realtime_ns();
    });
  }
  return true;
}

}  // namespace chronolink::trace
