#include "agent/export/offsets_jsonl_writer.h"

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

namespace chronolink {

namespace {
nlohmann::ordered_json NullableNumber(bool present, double v) {
  return present ? nlohmann::ordered_json(v) : nlohmann::ordered_json(nullptr);
}

void AddContext(const OffsetLineContext& c, nlohmann::ordered_json* j) {
  if (c.leader) (*j)["leader"] = *c.leader;
  if (c.recomputed) (*j)["recomputed"] = true;
  if (!c.method.empty() && c.method != "global") (*j)["method"] = c.method;
}

// v·scale rounded to an integer, when it is one a reader can hold.
bool Scaled(double v, double scale, int64_t* out) {
  const double x = v * scale;
  if (!std::isfinite(x) || std::fabs(x) >= 0x1p62) return false;
  *out = std::llround(x);
  return true;
}
}  // namespace

std::string OffsetLineJson(const NodeSolution& s, const OffsetLineContext& c) {
  nlohmann::ordered_json j;
  j["schema"] = kOffsetSchema;
  j["node"] = s.node;
  j["reference"] = c.reference_node ? nlohmann::ordered_json(*c.reference_node)
                                    : nlohmann::ordered_json("mean");
  j["t_ns"] = c.reference_instant_ns;
  j["offset_ns"] = NullableNumber(s.reachable, s.offset_ns);
  j["drift"] = NullableNumber(s.reachable, s.drift);
  j["uncertainty_ns"] = NullableNumber(s.reachable, s.uncertainty_ns);
  j["residual_ns"] = NullableNumber(s.reachable, s.residual_ns);
  j["reachable"] = s.reachable;
  j["component"] = s.component;
  j["edges_used"] = s.edges_used;
  AddContext(c, &j);
  return j.dump();
}

std::optional<std::string> OffsetColumnsJson(const std::vector<NodeSolution>& nodes,
                                             const OffsetLineContext& c) {
  using Json = nlohmann::ordered_json;
  Json node_delta = Json::array(), offset = Json::array(), drift = Json::array(), sigma = Json::array(),
       residual = Json::array(), component = Json::array(), edges = Json::array();
  int64_t previous = 0;
  for (const NodeSolution& s : nodes) {
    node_delta.push_back(static_cast<int64_t>(s.node) - previous);
    previous = s.node;
    int64_t o = 0, d = 0, u = 0, r = 0;
    // Unreachable: no number is written, as in the rows.
    if (s.reachable && (!Scaled(s.offset_ns, 1e3, &o) || !Scaled(s.drift, 1e12, &d) ||
                        !Scaled(s.uncertainty_ns, 1e3, &u) || !Scaled(s.residual_ns, 1e3, &r))) {
      return std::nullopt;
    }
    offset.push_back(s.reachable ? Json(o) : Json(nullptr));
    drift.push_back(s.reachable ? Json(d) : Json(nullptr));
    sigma.push_back(s.reachable ? Json(u) : Json(nullptr));
    residual.push_back(s.reachable ? Json(r) : Json(nullptr));
    component.push_back(s.component);
    edges.push_back(s.edges_used);
  }
  Json j;
  j["schema"] = kOffsetColumnsSchema;
  j["reference"] = c.reference_node ? Json(*c.reference_node) : Json("mean");
  j["t_ns"] = c.reference_instant_ns;
  AddContext(c, &j);
  j["node_delta"] = std::move(node_delta);
  j["offset_ps"] = std::move(offset);
  j["drift_ps_per_s"] = std::move(drift);
  j["uncertainty_ps"] = std::move(sigma);
  j["residual_ps"] = std::move(residual);
  j["component"] = std::move(component);
  j["edges_used"] = std::move(edges);
  return j.dump();
}

std::string OffsetsInstantText(const std::vector<NodeSolution>& nodes, const OffsetLineContext& context,
                               OffsetsForm form, size_t* lines) {
  if (OffsetsAsColumns(form, nodes.size()) && !nodes.empty()) {
    if (std::optional<std::string> line = OffsetColumnsJson(nodes, context)) {
      if (lines != nullptr) *lines = 1;
      return *line + "\n";
    }
  }
  std::string text;
  for (const NodeSolution& s : nodes) text += OffsetLineJson(s, context) + "\n";
  if (lines != nullptr) *lines = nodes.size();
  return text;
}

OffsetsJsonlWriter::~OffsetsJsonlWriter() { Close(); }

bool OffsetsJsonlWriter::Open(const std::string& dir, std::string* error, FileRotation rotation,
                              OffsetsForm form) {
  form_ = form;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    *error = "cannot create output directory " + dir + ": " + ec.message();
    return false;
  }
  return file_.Open(std::filesystem::path(dir) / "offsets.jsonl", rotation, error);
}

bool OffsetsJsonlWriter::Write(const OffsetsSnapshot& snapshot, std::string* error) {
  if (!file_.is_open()) {
    *error = "offsets.jsonl is not open";
    return false;
  }
  OffsetLineContext c;
  c.reference_instant_ns = snapshot.reference_instant_ns;
  c.reference_node = snapshot.reference_node;
  c.leader = snapshot.leader;
  c.recomputed = snapshot.recomputed;
  size_t lines = 0;
  if (!file_.Append(OffsetsInstantText(snapshot.nodes, c, form_, &lines), error)) return false;
  lines_ += lines;
  // Whole instants only: a file may end after a snapshot's last line.
  return file_.Flush(error) && file_.RotateIfFull(error);
}

void OffsetsJsonlWriter::Close() { file_.Close(); }

}  // namespace chronolink
