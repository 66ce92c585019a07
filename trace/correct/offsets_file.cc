#include "trace/correct/offsets_file.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <utility>

#include "common/gzip_file.h"
#include "common/input_file.h"
#include "common/rotating_file.h"

namespace chronolink::trace {

namespace {

using Json = nlohmann::json;

constexpr size_t kMaxWarnings = 100;

// Field readers: each returns an empty string on success, else what is wrong.
std::string Describe(const Json& v) {
  std::string text = v.dump();
  if (text.size() > 40) text = text.substr(0, 37) + "...";
  return text;
}

const Json* Field(const Json& j, const char* name, std::string* why) {
  const auto it = j.find(name);
  if (it == j.end()) {
    *why = std::string("field \"") + name + "\" is missing";
    return nullptr;
  }
  return &*it;
}

bool ReadInt64(const Json& j, const char* name, int64_t* out, std::string* why) {
  const Json* v = Field(j, name, why);
  if (v == nullptr) return false;
  if (v->is_number_unsigned() && v->get<uint64_t>() <= uint64_t{std::numeric_limits<int64_t>::max()}) {
    *out = static_cast<int64_t>(v->get<uint64_t>());
    return true;
  }
  if (v->is_number_integer() && !v->is_number_unsigned()) {
    *out = v->get<int64_t>();
    return true;
  }
  *why = std::string("field \"") + name + "\" must be an int64 integer, got " + Describe(*v);
  return false;
}

bool ReadBoundedInt(const Json& j, const char* name, int64_t lo, int64_t hi, int64_t* out,
                    std::string* why) {
  if (!ReadInt64(j, name, out, why)) return false;
  if (*out < lo || *out > hi) {
    *why = std::string("field \"") + name + "\" is out of range [" + std::to_string(lo) + ", " +
           std::to_string(hi) + "]: " + std::to_string(*out);
    return false;
  }
  return true;
}

// A number or null; a reachable line needs a number (checked by the caller).
bool ReadNullableNumber(const Json& j, const char* name, std::optional<double>* out, std::string* why) {
  const Json* v = Field(j, name, why);
  if (v == nullptr) return false;
  if (v->is_null()) {
    out->reset();
    return true;
  }
  if (!v->is_number()) {
    *why = std::string("field \"") + name + "\" must be a number or null, got " + Describe(*v);
    return false;
  }
  const double d = v->get<double>();
  if (!std::isfinite(d)) {
    *why = std::string("field \"") + name + "\" is not finite";
    return false;
  }
  *out = d;
  return true;
}

bool ReadBool(const Json& j, const char* name, bool* out, std::string* why) {
  const Json* v = Field(j, name, why);
  if (v == nullptr) return false;
  if (!v->is_boolean()) {
    *why = std::string("field \"") + name + "\" must be true or false, got " + Describe(*v);
    return false;
  }
  *out = v->get<bool>();
  return true;
}

bool ReadReference(const Json& j, ClockReference* out, std::string* why) {
  const Json* v = Field(j, "reference", why);
  if (v == nullptr) return false;
  if (v->is_string() && v->get<std::string>() == "mean") {
    *out = ClockReference{.is_mean = true};
    return true;
  }
  if (v->is_number_unsigned() && v->get<uint64_t>() <= std::numeric_limits<uint32_t>::max()) {
    *out = ClockReference{.is_mean = false, .node = static_cast<uint32_t>(v->get<uint64_t>())};
    return true;
  }
  *why = "field \"reference\" must be a node id (uint32) or \"mean\", got " + Describe(*v);
  return false;
}

// Where a solution's numbers are, named in refusals as the line names
// them, each shown in its own unit.
struct SolutionFields {
  const char* offset;
  const char* drift;
  const char* uncertainty;
  double offset_scale, drift_scale;  // from ns and from a ratio to the field's unit
};
constexpr SolutionFields kRowFields{"offset_ns", "drift", "uncertainty_ns", 1, 1};
constexpr SolutionFields kColumnFields{"offset_ps", "drift_ps_per_s", "uncertainty_ps", 1e3, 1e12};

// The offset numbers of a reachable line: present, finite and plausible.
bool CheckSolution(const std::optional<double>& offset, const std::optional<double>& drift,
                   const std::optional<double>& uncertainty, const SolutionFields& f, std::string* why) {
  const auto quoted = [](const char* name) { return "\"" + std::string(name) + "\""; };
  if (!offset || !drift || !uncertainty) {
    *why = "a reachable line needs numbers in " + quoted(f.offset) + ", " + quoted(f.drift) + " and " +
           quoted(f.uncertainty);
    return false;
  }
  if (std::fabs(*offset) > kMaxAbsOffsetNs) {
    *why = quoted(f.offset) + " " + std::to_string(*offset * f.offset_scale) + " is more than a day: not a clock offset";
    return false;
  }
  if (std::fabs(*drift) > kMaxAbsDrift) {
    *why = quoted(f.drift) + " " + std::to_string(*drift * f.drift_scale) + " is more than 25 %: not a clock drift";
    return false;
  }
  if (*uncertainty < 0) {
    *why = quoted(f.uncertainty) + " is negative: " + std::to_string(*uncertainty * f.offset_scale);
    return false;
  }
  return true;
}

// The context every form's line carries: the reference, the instant, who
// solved it and whether it is a re-solve.
bool ReadInstant(const Json& j, OffsetRecord* r, ClockReference* reference, std::string* why) {
  if (!ReadReference(j, reference, why) || !ReadInt64(j, "t_ns", &r->t_ns, why)) return false;
  if (j.contains("leader")) {
    int64_t leader = 0;
    if (!ReadBoundedInt(j, "leader", 0, std::numeric_limits<uint32_t>::max(), &leader, why)) return false;
    r->leader = static_cast<uint32_t>(leader);
  }
  r->recomputed = false;
  return !j.contains("recomputed") || ReadBool(j, "recomputed", &r->recomputed, why);
}

// A rows line ("chronolink.offset.v1"): one node at one instant.
bool ParseRowLine(const Json& j, OffsetRecord* r, ClockReference* reference, std::string* why) {
  int64_t node = 0, component = 0, edges_used = 0;
  std::optional<double> offset, drift, uncertainty;
  if (!ReadBoundedInt(j, "node", 0, std::numeric_limits<uint32_t>::max(), &node, why) ||
      !ReadInstant(j, r, reference, why) || !ReadBool(j, "reachable", &r->reachable, why) ||
      !ReadNullableNumber(j, "offset_ns", &offset, why) || !ReadNullableNumber(j, "drift", &drift, why) ||
      !ReadNullableNumber(j, "uncertainty_ns", &uncertainty, why) ||
      !ReadNullableNumber(j, "residual_ns", &r->residual_ns, why) ||
      !ReadBoundedInt(j, "component", -1, std::numeric_limits<int32_t>::max(), &component, why) ||
      !ReadBoundedInt(j, "edges_used", 0, std::numeric_limits<int32_t>::max(), &edges_used, why)) {
    return false;
  }
  r->node = static_cast<uint32_t>(node);
  r->component = static_cast<int32_t>(component);
  r->edges_used = static_cast<int32_t>(edges_used);
  if (!r->reachable) return true;  // numbers of an unreachable node mean nothing
  if (!CheckSolution(offset, drift, uncertainty, kRowFields, why)) return false;
  r->offset_ns = *offset;
  r->drift = *drift;
  r->uncertainty_ns = *uncertainty;
  return true;
}

// One column of a columns line: an array of `size` entries (or, for the
// first column read, of any size, which it then sets).
const Json* Column(const Json& j, const char* name, size_t* size, std::string* why) {
  const Json* v = Field(j, name, why);
  if (v == nullptr) return nullptr;
  if (!v->is_array()) {
    *why = std::string("column \"") + name + "\" must be an array, got " + Describe(*v);
    return nullptr;
  }
  if (*size != SIZE_MAX && v->size() != *size) {
    *why = std::string("column \"") + name + "\" has " + std::to_string(v->size()) + " entries, \"node_delta\" " +
           std::to_string(*size);
    return nullptr;
  }
  *size = v->size();
  return v;
}

// Entry i of an integer column, within [lo, hi], or null where `nullable`.
bool ColumnInt(const Json& column, const char* name, size_t i, int64_t lo, int64_t hi, bool nullable,
               std::optional<int64_t>* out, std::string* why) {
  const Json& v = column[i];
  if (v.is_null() && nullable) {
    out->reset();
    return true;
  }
  const bool is_int = v.is_number_integer() &&
                      (!v.is_number_unsigned() || v.get<uint64_t>() <= uint64_t{std::numeric_limits<int64_t>::max()});
  const int64_t x = is_int ? v.get<int64_t>() : 0;
  if (!is_int || x < lo || x > hi) {
    *why = std::string("column \"") + name + "\" entry " + std::to_string(i) + " must be an integer in [" +
           std::to_string(lo) + ", " + std::to_string(hi) + "]" + (nullable ? " or null" : "") + ", got " +
           Describe(v);
    return false;
  }
  *out = x;
  return true;
}

std::optional<double> Scaled(const std::optional<int64_t>& v, double unit) {
  return v ? std::optional<double>(static_cast<double>(*v) * unit) : std::nullopt;
}

// A columns line ("chronolink.offset_columns.v1"): every node of one
// instant, a column per field (docs/formats.md). All or nothing: a bad entry
// refuses the line.
bool ParseColumnsLine(const Json& j, std::vector<OffsetRecord>* out, ClockReference* reference, std::string* why) {
  OffsetRecord instant;
  if (!ReadInstant(j, &instant, reference, why)) return false;
  size_t n = SIZE_MAX;
  const Json* delta = Column(j, "node_delta", &n, why);
  const Json* offset = delta ? Column(j, "offset_ps", &n, why) : nullptr;
  const Json* drift = offset ? Column(j, "drift_ps_per_s", &n, why) : nullptr;
  const Json* sigma = drift ? Column(j, "uncertainty_ps", &n, why) : nullptr;
  const Json* residual = sigma ? Column(j, "residual_ps", &n, why) : nullptr;
  const Json* component = residual ? Column(j, "component", &n, why) : nullptr;
  const Json* edges = component ? Column(j, "edges_used", &n, why) : nullptr;
  if (edges == nullptr) return false;
  constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();
  constexpr int64_t kNodeMax = std::numeric_limits<uint32_t>::max();
  constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();
  std::vector<OffsetRecord> records(n, instant);
  int64_t node = 0;
  for (size_t i = 0; i < n; ++i) {
    OffsetRecord& r = records[i];
    std::optional<int64_t> d, o, k, u, res, c, e;
    if (!ColumnInt(*delta, "node_delta", i, -node, kNodeMax - node, false, &d, why) ||
        !ColumnInt(*offset, "offset_ps", i, -kInt64Max, kInt64Max, true, &o, why) ||
        !ColumnInt(*drift, "drift_ps_per_s", i, -kInt64Max, kInt64Max, true, &k, why) ||
        !ColumnInt(*sigma, "uncertainty_ps", i, -kInt64Max, kInt64Max, true, &u, why) ||
        !ColumnInt(*residual, "residual_ps", i, -kInt64Max, kInt64Max, true, &res, why) ||
        !ColumnInt(*component, "component", i, -1, kInt32Max, false, &c, why) ||
        !ColumnInt(*edges, "edges_used", i, 0, kInt32Max, false, &e, why)) {
      return false;
    }
    node += *d;
    r.node = static_cast<uint32_t>(node);
    r.component = static_cast<int32_t>(*c);
    r.edges_used = static_cast<int32_t>(*e);
    // Reachable is where an offset is given, as the rows' null says.
    r.reachable = o.has_value();
    r.residual_ns = Scaled(res, 1e-3);
    if (!r.reachable) continue;
    const std::optional<double> offset_ns = Scaled(o, 1e-3), drift_value = Scaled(k, 1e-12),
                                uncertainty_ns = Scaled(u, 1e-3);
    if (!CheckSolution(offset_ns, drift_value, uncertainty_ns, kColumnFields, why)) {
      *why = "node " + std::to_string(r.node) + " (entry " + std::to_string(i) + "): " + *why;
      return false;
    }
    r.offset_ns = *offset_ns;
    r.drift = *drift_value;
    r.uncertainty_ns = *uncertainty_ns;
  }
  std::vector<uint32_t> ids;
  ids.reserve(n);
  for (const OffsetRecord& r : records) ids.push_back(r.node);
  std::sort(ids.begin(), ids.end());
  if (const auto twice = std::adjacent_find(ids.begin(), ids.end()); twice != ids.end()) {
    *why = "node " + std::to_string(*twice) + " appears twice in one instant";
    return false;
  }
  *out = std::move(records);
  return true;
}

// Parses one line of either form into its records (everything but where
// they came from).
bool ParseLine(std::string_view line, std::vector<OffsetRecord>* records, ClockReference* reference,
               std::string* why) {
  const Json j = Json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    *why = "not JSON (or a number JSON cannot hold: NaN, infinity)";
    return false;
  }
  if (!j.is_object()) {
    *why = "not a JSON object";
    return false;
  }
  const auto schema = j.find("schema");
  const std::string name = schema != j.end() && schema->is_string() ? schema->get<std::string>() : "";
  if (name == kOffsetsSchema) {
    records->assign(1, OffsetRecord{});
    return ParseRowLine(j, &records->front(), reference, why);
  }
  if (name == kOffsetColumnsSchema) return ParseColumnsLine(j, records, reference, why);
  *why = std::string("schema is neither \"") + kOffsetsSchema + "\" nor \"" + kOffsetColumnsSchema + "\"" +
         (schema == j.end() ? " (no \"schema\" field)" : ": " + Describe(*schema));
  return false;
}

bool IsBlank(std::string_view line) {
  return line.find_first_not_of(" \t\r") == std::string_view::npos;
}

}  // namespace

std::string ClockReference::ToString() const {
  return is_mean ? std::string("mean") : "node " + std::to_string(node);
}

std::string OffsetsInput::Where(const OffsetRecord& record) const {
  const std::string& file = record.file_index < files.size() ? files[record.file_index] : "?";
  return file + ":" + std::to_string(record.line_number);
}

bool OffsetsReader::SetReference(const ClockReference& reference, uint32_t line_number,
                                 std::string* error) {
  const std::string here = input_.files.back() + ":" + std::to_string(line_number);
  if (!reference_where_) {
    input_.reference = reference;
    reference_where_ = here;
    return true;
  }
  if (reference == input_.reference) return true;
  *error = here + ": reference changes from " + input_.reference.ToString() + " (" + *reference_where_ +
           ") to " + reference.ToString() +
           ": one correction needs one reference clock; pass only the files solved against one "
           "reference, or re-solve the edges with chronolink-solve --reference";
  return false;
}

bool OffsetsReader::AddLine(std::string_view line, uint32_t line_number, std::string* error) {
  if (IsBlank(line)) return true;
  ++input_.lines_read;
  std::vector<OffsetRecord> records;
  ClockReference reference;
  std::string why;
  if (!ParseLine(line, &records, &reference, &why)) {
    const std::string message = input_.files.back() + ":" + std::to_string(line_number) + ": " + why;
    if (!options_.skip_bad_lines) {
      *error = message;
      return false;
    }
    ++input_.lines_skipped;
    if (input_.warnings.size() < kMaxWarnings) input_.warnings.push_back(message);
    return true;
  }
  if (!SetReference(reference, line_number, error)) return false;
  for (OffsetRecord& r : records) {
    r.file_index = static_cast<uint32_t>(input_.files.size() - 1);
    r.line_number = line_number;
    input_.records.push_back(r);
  }
  input_.solutions_read += records.size();
  return true;
}

// An empty file is normal: every agent that might lead opens offsets.jsonl,
// and one that never led leaves it empty. Only no line at all is an error
// (Finish).
void OffsetsReader::EndSource(uint64_t lines_before) {
  if (input_.lines_read != lines_before) return;
  if (input_.warnings.size() < kMaxWarnings)
    input_.warnings.push_back(input_.files.back() + ": no offsets line (empty file)");
}

bool OffsetsReader::AddText(std::string_view text, const std::string& name, std::string* error) {
  input_.files.push_back(name);
  const uint64_t before = input_.lines_read;
  uint32_t line_number = 0;
  while (!text.empty()) {
    const size_t end = text.find('\n');
    if (!AddLine(text.substr(0, end), ++line_number, error)) return false;
    if (end == std::string_view::npos) break;
    text.remove_prefix(end + 1);
  }
  EndSource(before);
  return true;
}

// Streams line by line: an offsets file of a long run can be large. A
// rotated one is gzip-compressed; the reader takes either.
bool OffsetsReader::AddFile(const std::string& path, std::string* error) {
  LineFileReader in;
  if (!in.Open(path, error)) return false;
  input_.files.push_back(path);
  const uint64_t before = input_.lines_read;
  uint32_t line_number = 0;
  std::string line;
  while (in.Next(&line)) {
    if (!AddLine(line, ++line_number, error)) return false;
  }
  if (!in.error().empty()) {
    *error = in.error() + " (after line " + std::to_string(line_number) + ")";
    return false;
  }
  EndSource(before);
  return true;
}

uint64_t MergeSameInstants(std::vector<OffsetRecord>* records) {
  // Stable: equal (node, t_ns) stay in reading order, so the last one read is last.
  std::stable_sort(records->begin(), records->end(), [](const OffsetRecord& a, const OffsetRecord& b) {
    return a.node != b.node ? a.node < b.node : a.t_ns < b.t_ns;
  });
  const auto read_later = [](const OffsetRecord& a, const OffsetRecord& b) {
    return std::pair(a.file_index, a.line_number) > std::pair(b.file_index, b.line_number);
  };
  std::vector<OffsetRecord> kept;
  kept.reserve(records->size());
  uint64_t replaced = 0;
  for (const OffsetRecord& r : *records) {
    if (!kept.empty() && kept.back().node == r.node && r.t_ns - kept.back().t_ns <= kSameInstantNs) {
      if (r.t_ns == kept.back().t_ns || read_later(r, kept.back())) kept.back() = r;
      ++replaced;
    } else {
      kept.push_back(r);
    }
  }
  *records = std::move(kept);
  return replaced;
}

bool OffsetsReader::Finish(OffsetsInput* out, std::string* error) {
  std::vector<OffsetRecord>& records = input_.records;
  if (records.empty()) {
    std::string names;
    for (const std::string& f : input_.files) names += (names.empty() ? "" : ", ") + f;
    *error = "no usable offsets line in " + (names.empty() ? std::string("(no file)") : names);
    return false;
  }
  input_.lines_replaced += MergeSameInstants(&records);
  *out = std::move(input_);
  input_ = OffsetsInput{};
  reference_where_.reset();
  return true;
}

bool ReadOffsetsFiles(const std::vector<std::string>& paths, const OffsetsReadOptions& options,
                      OffsetsInput* out, std::string* error) {
  OffsetsReader reader(options);
  for (const std::string& given : paths) {
    for (const std::string& path : RotatedSet(given)) {
      if (!reader.AddFile(path, error)) return false;
    }
  }
  return reader.Finish(out, error);
}

}  // namespace chronolink::trace
