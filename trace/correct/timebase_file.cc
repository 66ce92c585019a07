#include "trace/correct/timebase_file.h"

#include <algorithm>
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
  if (schema == j.end() || *schema != kTimebaseSchema) {
    *error = where + ": schema is not \"" + kTimebaseSchema + "\" (a timebase.jsonl line)";
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
  std::vector<TimebaseStretch>& run = runs_[Key{source_, static_cast<uint32_t>(node), session->get<std::string>()}];
  if (run.empty() || step->get<bool>() || (gap != j.end() && gap->get<bool>())) run.emplace_back();
  std::vector<TimebasePoint>& knots = run.back().knots;
  if (!knots.empty() && !(p.raw_ns > knots.back().raw_ns && p.realtime_ns > knots.back().realtime_ns)) {
    *error = where + ": a knot must come after the one before it in both clocks (raw_ns " +
             std::to_string(p.raw_ns) + ", realtime_ns " + std::to_string(p.realtime_ns) + ")";
    return false;
  }
  knots.push_back(p);
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
