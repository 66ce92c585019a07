#include "agent/export/offsets_jsonl_writer.h"

#include <filesystem>
#include <nlohmann/json.hpp>

namespace chronolink {

namespace {
nlohmann::ordered_json NullableNumber(bool present, double v) {
  return present ? nlohmann::ordered_json(v) : nlohmann::ordered_json(nullptr);
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
  if (c.leader) j["leader"] = *c.leader;
  if (c.recomputed) j["recomputed"] = true;
  if (!c.method.empty() && c.method != "global") j["method"] = c.method;
  return j.dump();
}

OffsetsJsonlWriter::~OffsetsJsonlWriter() { Close(); }

bool OffsetsJsonlWriter::Open(const std::string& dir, std::string* error, FileRotation rotation) {
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
  for (const NodeSolution& s : snapshot.nodes) {
    if (!file_.Append(OffsetLineJson(s, c) + "\n", error)) return false;
    ++lines_;
  }
  // Whole instants only: a file may end after a snapshot's last line.
  return file_.Flush(error) && file_.RotateIfFull(error);
}

void OffsetsJsonlWriter::Close() { file_.Close(); }

}  // namespace chronolink
