#include "trace/correct/edge_coverage.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>

#include "common/input_file.h"

namespace chronolink::trace {

namespace {

using Json = nlohmann::json;

bool IsUint32(const Json& v) {
  return v.is_number_unsigned() && v.get<uint64_t>() <= std::numeric_limits<uint32_t>::max();
}

bool IsInt64(const Json& v) {
  return v.is_number_integer() &&
         (!v.is_number_unsigned() || v.get<uint64_t>() <= uint64_t{std::numeric_limits<int64_t>::max()});
}

bool HasNumber(const Json& j, const char* name) {
  const auto it = j.find(name);
  return it != j.end() && it->is_number() && std::isfinite(it->get<double>());
}

// One line's facts, or what is wrong with it.
struct EdgeLine {
  uint32_t node = 0;
  uint32_t peer = 0;
  NodeClockInterval window;  // prober's clock
  bool usable = false;
  double beta_ns = 0;  // peer − prober, when usable
};

bool ParseEdgeLine(std::string_view text, EdgeLine* e, std::string* why) {
  const Json j = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    *why = "not a JSON object";
    return false;
  }
  const auto schema = j.find("schema");
  if (schema == j.end() || !schema->is_string() || schema->get<std::string>() != kEdgesSchema) {
    *why = std::string("schema is not \"") + kEdgesSchema + "\"";
    return false;
  }
  for (const char* name : {"node", "peer"}) {
    if (!j.contains(name) || !IsUint32(j[name])) {
      *why = std::string("field \"") + name + "\" must be a node id (uint32)";
      return false;
    }
  }
  for (const char* name : {"window_start_ns", "window_end_ns"}) {
    if (!j.contains(name) || !IsInt64(j[name])) {
      *why = std::string("field \"") + name + "\" must be an int64 integer";
      return false;
    }
  }
  const auto estimator = j.find("estimator");
  if (estimator == j.end() || !estimator->is_string()) {
    *why = "field \"estimator\" must be a string";
    return false;
  }
  e->node = j["node"].get<uint32_t>();
  e->peer = j["peer"].get<uint32_t>();
  e->window = {j["window_start_ns"].get<int64_t>(), j["window_end_ns"].get<int64_t>()};
  if (e->window.end_ns <= e->window.start_ns) {
    *why = "window_end_ns is not after window_start_ns";
    return false;
  }
  e->usable = estimator->get<std::string>() != "none" && HasNumber(j, "beta_ns") &&
              HasNumber(j, "alpha") && HasNumber(j, "uncertainty_ns");
  if (e->usable) e->beta_ns = j["beta_ns"].get<double>();
  return true;
}

// Moves a prober-clock window onto the peer's clock; nullopt-free: a beta
// no clock has (beyond a day) leaves the window where it is.
NodeClockInterval Shift(NodeClockInterval w, double beta_ns) {
  if (!(std::fabs(beta_ns) < 86'400e9)) return w;
  const int64_t shift = std::llround(beta_ns);
  int64_t start = 0, end = 0;
  if (__builtin_add_overflow(w.start_ns, shift, &start) || __builtin_add_overflow(w.end_ns, shift, &end))
    return w;
  return {start, end};
}

// Sorted, merged; windows that miss each other by no more than `tolerance_ns` join.
std::vector<NodeClockInterval> Merge(std::vector<NodeClockInterval> windows, int64_t tolerance_ns) {
  std::sort(windows.begin(), windows.end(),
            [](const auto& a, const auto& b) { return a.start_ns < b.start_ns; });
  std::vector<NodeClockInterval> merged;
  for (const NodeClockInterval& w : windows) {
    if (!merged.empty() && w.start_ns <= merged.back().end_ns + tolerance_ns) {
      merged.back().end_ns = std::max(merged.back().end_ns, w.end_ns);
    } else {
      merged.push_back(w);
    }
  }
  return merged;
}

}  // namespace

void EdgeCoverage::Note(uint32_t node, NodeClockInterval window, bool usable) {
  NodeWindows& n = nodes_[node];
  if (usable) n.covered.push_back(window);
  n.span_start_ns = n.has_span ? std::min(n.span_start_ns, window.start_ns) : window.start_ns;
  n.span_end_ns = n.has_span ? std::max(n.span_end_ns, window.end_ns) : window.end_ns;
  n.has_span = true;
  n.longest_window_ns = std::max(n.longest_window_ns, window.end_ns - window.start_ns);
}

bool EdgeCoverage::AddLine(std::string_view line, const std::string& where, std::string* error) {
  if (line.find_first_not_of(" \t\r") == std::string_view::npos) return true;
  ++lines_read_;
  EdgeLine e;
  std::string why;
  if (!ParseEdgeLine(line, &e, &why)) {
    if (skip_bad_lines_) {
      ++lines_skipped_;
      return true;
    }
    *error = where + ": " + why;
    return false;
  }
  if (e.usable) ++lines_usable_;
  Note(e.node, e.window, e.usable);
  Note(e.peer, e.usable ? Shift(e.window, e.beta_ns) : e.window, e.usable);
  return true;
}

bool EdgeCoverage::AddText(std::string_view text, const std::string& name, std::string* error) {
  files_.push_back(name);
  uint32_t line_number = 0;
  while (!text.empty()) {
    const size_t end = text.find('\n');
    if (!AddLine(text.substr(0, end), name + ":" + std::to_string(++line_number), error)) return false;
    if (end == std::string_view::npos) break;
    text.remove_prefix(end + 1);
  }
  return true;
}

bool EdgeCoverage::AddFile(const std::string& path, std::string* error) {
  std::ifstream in;
  if (!OpenInputFile(path, &in, error)) return false;
  files_.push_back(path);
  uint32_t line_number = 0;
  std::string line;
  while (std::getline(in, line)) {
    if (!AddLine(line, path + ":" + std::to_string(++line_number), error)) return false;
  }
  if (in.bad()) {
    *error = path + ": read error after line " + std::to_string(line_number);
    return false;
  }
  return true;
}

void EdgeCoverage::Finish() {
  for (auto& [id, n] : nodes_) {
    const int64_t tolerance =
        static_cast<int64_t>(kHoleToleranceRatio * static_cast<double>(n.longest_window_ns));
    const std::vector<NodeClockInterval> covered = Merge(std::move(n.covered), tolerance);
    n.covered.clear();
    n.holes.clear();
    int64_t cursor = n.span_start_ns;
    for (const NodeClockInterval& c : covered) {
      if (c.start_ns - cursor > tolerance) n.holes.push_back({cursor, c.start_ns});
      cursor = std::max(cursor, c.end_ns);
    }
    if (covered.empty()) {
      n.holes.push_back({n.span_start_ns, n.span_end_ns});
    } else if (n.span_end_ns - cursor > tolerance) {
      n.holes.push_back({cursor, n.span_end_ns});
    }
  }
}

const std::vector<NodeClockInterval>& EdgeCoverage::Holes(uint32_t node) const {
  static const std::vector<NodeClockInterval> kNone;
  const auto it = nodes_.find(node);
  return it == nodes_.end() ? kNone : it->second.holes;
}

}  // namespace chronolink::trace
